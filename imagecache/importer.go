package imagecache

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// Archive formats Import recognises.
const (
	FormatOCILayout  = "oci-layout"  // a directory with oci-layout, index.json and blobs/
	FormatOCIArchive = "oci-archive" // a tar of an OCI layout
	FormatDockerSave = "docker-save" // a docker save tar (manifest.json)
	FormatRootfs     = "rootfs"      // a plain root filesystem tarball, possibly compressed
)

// Import adds the image at path to the store under name: an OCI image
// layout directory, an OCI archive, a docker save tar or a plain root
// filesystem tarball (tar, tar.gz or tar.zst). name may be empty when the
// archive names its image; a root filesystem always needs one.
func (s *Store) Import(ctx context.Context, path, name string, progress ProgressFunc) (*Image, error) {
	imgs, err := s.importArchive(ctx, path, path, name, false, progress)
	if err != nil {
		return nil, err
	}
	return imgs[0], nil
}

// ImportAll is Import, except that with no name an archive that names
// several images (sbx save A B) adds all of them, as docker load does;
// they come back in the archive's order. shown stands for path in
// messages (an uploaded archive's temporary file is "the archive").
func (s *Store) ImportAll(ctx context.Context, path, shown, name string, progress ProgressFunc) ([]*Image, error) {
	return s.importArchive(ctx, path, shown, name, name == "", progress)
}

func (s *Store) importArchive(ctx context.Context, path, shown, name string, all bool, progress ProgressFunc) ([]*Image, error) {
	// Held shared from the staging directory on: RemoveDebris takes the
	// lock exclusively before it removes staging directories.
	unlock, err := s.Hold(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	format, err := detectFormat(path, shown)
	if err != nil {
		return nil, err
	}
	one := func(img *Image, err error) ([]*Image, error) {
		if err != nil {
			return nil, err
		}
		return []*Image{img}, nil
	}
	switch format {
	case FormatOCILayout:
		return s.importLayout(ctx, path, shown, name, all, progress)
	case FormatOCIArchive:
		dir, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), "import-")
		if err != nil {
			return nil, diskErr(s.root, err)
		}
		defer os.RemoveAll(dir)
		if err := extractLayout(path, dir); err != nil {
			return nil, diskErr(s.root, fmt.Errorf("import %s: %w", shown, err))
		}
		return s.importLayout(ctx, dir, shown, name, all, progress)
	case FormatDockerSave:
		return one(s.importDockerSave(ctx, path, shown, name, progress))
	default:
		return one(s.importRootfs(ctx, path, shown, name, progress))
	}
}

// DetectFormat tells which kind of image archive path is.
func DetectFormat(p string) (string, error) { return detectFormat(p, p) }

// detectFormat is DetectFormat naming p as shown in its errors (an
// uploaded archive's temporary file is "the archive").
func detectFormat(p, shown string) (string, error) {
	isDir, err := sbx.CheckImportPath(p)
	if err != nil {
		return "", err
	}
	if isDir {
		return FormatOCILayout, nil
	}
	names := map[string]bool{}
	err = scanTar(p, func(hdr *tar.Header, _ io.Reader) error {
		names[path.Clean(strings.TrimPrefix(hdr.Name, "./"))] = true
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%w: import %s: not a tar archive (or a gzip or zstd compressed one): %w", sbx.ErrInvalid, shown, err)
	}
	switch {
	case names["oci-layout"] && names["index.json"]:
		return FormatOCIArchive, nil
	case names["manifest.json"]:
		return FormatDockerSave, nil
	}
	return FormatRootfs, nil
}

// openTar opens p, decompressing gzip or zstd.
func openTar(p string) (io.Reader, func(), error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	r, closeDec, err := decompressor(br)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, func() { closeDec(); f.Close() }, nil
}

func scanTar(p string, fn func(*tar.Header, io.Reader) error) error {
	r, done, err := openTar(p)
	if err != nil {
		return err
	}
	defer done()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(hdr, tr); err != nil {
			return err
		}
	}
}

// layoutName matches the files of an OCI layout. It is compiled on first
// use: its counted repetition makes a large program, which would cost every
// start of every program linking imagecache a third of a millisecond.
var layoutName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(oci-layout|index\.json|blobs/[a-z0-9]+/[a-f0-9]{32,128})$`)
})

// extractLayout writes the OCI layout files of the archive p into dir,
// ignoring anything else: only regular files with layout names, so a
// hostile archive cannot place files elsewhere.
func extractLayout(p, dir string) error {
	return scanTar(p, func(hdr *tar.Header, r io.Reader) error {
		n := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if hdr.Typeflag != tar.TypeReg || !layoutName().MatchString(n) {
			return nil
		}
		dst := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// Annotations naming an image in an OCI index.
const (
	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationImageName = "io.containerd.image.name"
)

type candidate struct {
	desc v1.Descriptor
	idx  v1.ImageIndex
}

func (s *Store) importLayout(ctx context.Context, dir, shown, want string, all bool, progress ProgressFunc) ([]*Image, error) {
	ii, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("import %s: read OCI layout: %w", shown, err)
	}
	var cands []candidate
	if err := collectImages(ii, &cands, 0); err != nil {
		return nil, fmt.Errorf("import %s: %w", shown, err)
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("import %s: %w: the layout holds no image", shown, ErrUnsupported)
	}
	plat := s.platform()
	var matched []candidate
	for _, c := range cands {
		if c.desc.Platform == nil || c.desc.Platform.Satisfies(plat) {
			matched = append(matched, c)
		}
	}
	if len(matched) == 0 {
		return nil, fmt.Errorf("import %s: %w: no image for platform %s; choose one with --platform", shown, ErrUnsupported, plat.String())
	}
	if len(matched) > 1 && all {
		return s.importNamed(ctx, shown, matched, progress)
	}
	chosen := matched[0]
	if len(matched) > 1 {
		found := false
		for _, c := range matched {
			if want != "" && s.sameName(refNameOf(c.desc), want) {
				chosen, found = c, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("import %s: the layout holds %d images (%s); give the NAME of one", shown, len(matched), strings.Join(refNames(matched), ", "))
		}
	}
	nameFromArchive := refNameOf(chosen.desc)
	finalName := want
	if finalName == "" {
		finalName = nameFromArchive
	}
	// A bare ref name ("v1", "bb") is, by the OCI convention, often only a
	// tag: it names the image only when the caller gives it as NAME.
	if finalName == "" || want == "" && !fullName(finalName) {
		return nil, fmt.Errorf("import %s: the archive does not name its image (ref name %q); give a NAME", shown, nameFromArchive)
	}
	img, err := s.importCandidate(ctx, shown, finalName, chosen, progress)
	if err != nil {
		return nil, err
	}
	return []*Image{img}, nil
}

// importNamed adds every image of cands under its own ref name, which must
// be a full name (REPO:TAG or REPO/...).
func (s *Store) importNamed(ctx context.Context, shown string, cands []candidate, progress ProgressFunc) ([]*Image, error) {
	for _, c := range cands {
		if !fullName(refNameOf(c.desc)) {
			return nil, fmt.Errorf("import %s: the layout holds %d images (%s), not all of them named; give the NAME of one", shown, len(cands), strings.Join(refNames(cands), ", "))
		}
	}
	var out []*Image
	for _, c := range cands {
		img, err := s.importCandidate(ctx, shown, refNameOf(c.desc), c, progress)
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

func (s *Store) importCandidate(ctx context.Context, shown, name string, c candidate, progress ProgressFunc) (*Image, error) {
	ref, err := s.canonicalName(name)
	if err != nil {
		return nil, err
	}
	img, err := c.idx.Image(c.desc.Digest)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", shown, err)
	}
	return s.addImage(ctx, ref.Name(), c.desc.Digest.String(), img, blobsHashed, progress)
}

// fullName reports whether an archive's ref name names an image on its
// own (busybox:1.36, example.com/app) rather than being a bare tag.
func fullName(n string) bool { return strings.ContainsAny(n, "/:") }

func refNames(cands []candidate) []string {
	var names []string
	for _, c := range cands {
		n := refNameOf(c.desc)
		if n == "" {
			n = "(unnamed)"
		}
		names = append(names, n)
	}
	return names
}

// collectImages lists the image manifests of ii, descending into nested
// indexes.
func collectImages(ii v1.ImageIndex, out *[]candidate, depth int) error {
	if depth > 4 {
		return errors.New("image indexes nested too deep")
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsImage():
			*out = append(*out, candidate{desc: d, idx: ii})
		case d.MediaType.IsIndex():
			child, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return err
			}
			n := len(*out)
			if err := collectImages(child, out, depth+1); err != nil {
				return err
			}
			// Children inherit the name of the index that lists them.
			for i := n; i < len(*out); i++ {
				if refNameOf((*out)[i].desc) == "" && d.Annotations != nil {
					if (*out)[i].desc.Annotations == nil {
						(*out)[i].desc.Annotations = map[string]string{}
					}
					for _, k := range []string{annotationImageName, annotationRefName} {
						if v := d.Annotations[k]; v != "" {
							(*out)[i].desc.Annotations[k] = v
						}
					}
				}
			}
		}
	}
	return nil
}

func refNameOf(d v1.Descriptor) string {
	if n := d.Annotations[annotationImageName]; n != "" {
		return n
	}
	return d.Annotations[annotationRefName]
}

// sameName compares two references after normalisation; a bare tag matches
// the tag of the other.
func (s *Store) sameName(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := s.canonicalName(a)
	rb, err2 := s.canonicalName(b)
	if err1 == nil && err2 == nil && ra.Name() == rb.Name() {
		return true
	}
	if t, ok := rb.(name.Tag); ok && err2 == nil && a == t.TagStr() {
		return true
	}
	return false
}

type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func (s *Store) importDockerSave(ctx context.Context, p, shown, want string, progress ProgressFunc) (*Image, error) {
	var manifest []dockerManifest
	err := scanTar(p, func(hdr *tar.Header, r io.Reader) error {
		if path.Clean(strings.TrimPrefix(hdr.Name, "./")) != "manifest.json" {
			return nil
		}
		return json.NewDecoder(io.LimitReader(r, 16<<20)).Decode(&manifest)
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: read manifest.json: %w", shown, err)
	}
	if len(manifest) == 0 {
		return nil, fmt.Errorf("import %s: manifest.json lists no image", shown)
	}
	var tag *name.Tag
	finalName := want
	if len(manifest) > 1 || (want == "" && len(manifest[0].RepoTags) > 0) {
		var all []string
		for _, m := range manifest {
			for _, t := range m.RepoTags {
				all = append(all, t)
				if (want == "" && tag == nil) || (want != "" && s.sameName(t, want)) {
					nt, err := name.NewTag(t)
					if err != nil {
						return nil, fmt.Errorf("import %s: tag %q: %w", shown, t, err)
					}
					tag = &nt
				}
			}
		}
		if tag == nil || (want == "" && len(manifest) > 1) {
			return nil, fmt.Errorf("import %s: the archive holds %d images (%s); give the NAME of one", shown, len(manifest), strings.Join(all, ", "))
		}
		if finalName == "" {
			finalName = tag.String()
		}
	}
	if finalName == "" {
		return nil, fmt.Errorf("import %s: the archive does not name its image; give a NAME", shown)
	}
	ref, err := s.canonicalName(finalName)
	if err != nil {
		return nil, err
	}
	opener := func() (io.ReadCloser, error) {
		r, done, err := openTar(p)
		if err != nil {
			return nil, err
		}
		return readCloser{r, done}, nil
	}
	img, err := tarball.Image(opener, tag)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", shown, err)
	}
	// docker save has no manifest digest; the config digest is the image ID.
	id, err := img.ConfigName()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", shown, err)
	}
	return s.addImage(ctx, ref.Name(), id.String(), img, blobsUncompressed, progress)
}

type readCloser struct {
	io.Reader
	done func()
}

func (r readCloser) Close() error { r.done(); return nil }

func (s *Store) importRootfs(ctx context.Context, p, shown, want string, progress ProgressFunc) (*Image, error) {
	if want == "" {
		return nil, fmt.Errorf("import %s: a root filesystem tarball needs a NAME", shown)
	}
	ref, err := s.canonicalName(want)
	if err != nil {
		return nil, err
	}
	var size int64
	if fi, err := os.Stat(p); err == nil {
		size = fi.Size()
	}
	src := layerSource{size: size, open: func() (io.ReadCloser, error) { return os.Open(p) }}
	unlock, err := s.lock(ctx, "store", unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	recs, err := s.ingest(ctx, []layerSource{src}, progress)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", shown, err)
	}
	step := HistoryEntry{Created: time.Now().UTC(), CreatedBy: "sbx import " + filepath.Base(shown)}
	// The digest depends on the content only: the same tarball imported
	// again is the same image.
	return s.record(ctx, ref.Name(), recs, ImageConfig{}, []HistoryEntry{step}, "linux/"+runtime.GOARCH, time.Time{})
}

// Empty records an image with no layers called name, with the config cfg:
// the start of a build's FROM scratch. Its digest depends on cfg alone.
func (s *Store) Empty(ctx context.Context, name string, cfg ImageConfig) (*Image, error) {
	ref, err := s.canonicalName(name)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lock(ctx, "store", unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.record(ctx, ref.Name(), nil, cfg, nil, "linux/"+runtime.GOARCH, time.Time{})
}

// record stores an image built here (rootfs import, commit): its digest is
// that of a config listing its diffIDs and runtime config.
// created goes into the digest; a zero created leaves it out, so that the
// digest depends on the layers and config only (an import).
func (s *Store) record(ctx context.Context, name string, recs []layerRec, cfg ImageConfig, history []HistoryEntry, platform string, created time.Time) (*Image, error) {
	now := time.Now().UTC()
	diffIDs := make([]string, len(recs))
	for i, r := range recs {
		diffIDs[i] = r.DiffID
	}
	blob, _ := json.Marshal(struct {
		Created  time.Time   `json:"created,omitzero"`
		Platform string      `json:"platform"`
		Config   ImageConfig `json:"config"`
		DiffIDs  []string    `json:"diff_ids"`
	}{created, platform, cfg, diffIDs})
	sum := sha256.Sum256(blob)
	rec := record{
		Name:     name,
		Digest:   "sha256:" + hex.EncodeToString(sum[:]),
		Created:  now,
		Stored:   now,
		Platform: platform,
		Config:   cfg,
		Layers:   recs,
		History:  history,
	}
	if err := s.put(ctx, rec); err != nil {
		return nil, err
	}
	return s.image(&rec), nil
}

// Commit stores layer, an uncompressed tar stream in OCI form (whiteouts as
// .wh. files, as a container's writable layer is exported), as a new layer
// on top of base and records the result as a new image called name, with
// cfg as its config (nil keeps the config of base).
func (s *Store) Commit(ctx context.Context, base *Image, name string, layer io.Reader, cfg *ImageConfig) (*Image, error) {
	return s.CommitStep(ctx, base, name, layer, cfg, "sbx commit")
}

// CommitStep is Commit with the history line createdBy; a nil layer adds
// no layer (the image differs from base in its config alone, and the
// history line says it made none), as a build's metadata steps do.
func (s *Store) CommitStep(ctx context.Context, base *Image, name string, layer io.Reader, cfg *ImageConfig, createdBy string) (*Image, error) {
	ref, err := s.canonicalName(name)
	if err != nil {
		return nil, err
	}
	if base == nil {
		return nil, errors.New("commit: no base image")
	}
	unlock, err := s.lock(ctx, "store", unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The base must still be complete: a concurrent gc may have run.
	recs := make([]layerRec, 0, len(base.LayerDirs)+1)
	for i, d := range base.LayerDirs {
		if !exists(d) {
			return nil, fmt.Errorf("commit: layer %s of the base image is gone; pull %s again", filepath.Base(d), FamiliarName(base.Name))
		}
		key := filepath.Base(d)
		recs = append(recs, layerRec{Key: key, DiffID: base.DiffIDs[i], Size: s.readMeta(key).Size})
	}
	if layer != nil {
		src := layerSource{open: func() (io.ReadCloser, error) { return io.NopCloser(layer), nil }}
		newRecs, err := s.ingest(ctx, []layerSource{src}, nil)
		if err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
		recs = append(recs, newRecs...)
	}
	c := base.Config
	if cfg != nil {
		c = *cfg
	}
	var history []HistoryEntry
	if rec, err := s.lookup(base.Digest); err == nil {
		history = slices.Clone(rec.History)
	}
	now := time.Now().UTC()
	history = append(history, HistoryEntry{Created: now, CreatedBy: createdBy, EmptyLayer: layer == nil})
	return s.record(ctx, ref.Name(), recs, c, history, base.Platform, now)
}
