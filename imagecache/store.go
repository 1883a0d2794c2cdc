package imagecache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/internal/errkind"
	"github.com/sbxrun/sbx/internal/fullfs"
)

// Store is an image cache on disk: unpacked layers keyed by diffID, shared
// by every image that uses them, and an index of image names. A Store is
// safe for concurrent use by goroutines and by processes sharing its root.
//
// Layout under the root:
//
//	layers/<key>/   an unpacked layer, ready to be an overlayfs lowerdir
//	index.json      the images: names, digests, configs and layer keys
//	tmp/            unpacks in progress (renamed into layers/ when complete)
//	locks/          flock files: one per layer being unpacked, the index, the store
type Store struct {
	root string
	opts Options
}

// Options configure a Store.
type Options struct {
	// Limits cap what unpacking one layer may create (bytes, entries,
	// path length, depth). Zero fields take unpack.DefaultLimits.
	Limits unpack.Limits
	// InsecureRegistries are registry hosts (host or host:port) reached
	// over plain HTTP. localhost and 127.0.0.1 always are.
	InsecureRegistries []string
	// Platform is the platform chosen from multi-arch images ("os/arch" or
	// "os/arch/variant"); empty means the host's.
	Platform string
	// Concurrency is how many layers are fetched and unpacked at once;
	// zero means max(2, number of CPUs).
	Concurrency int
}

// ErrNotFound means an image is not in the cache (Resolve) or not in the
// registry (Pull).
var ErrNotFound = errkind.New("image not found", sbx.ErrImageNotFound)

// Open opens (creating if needed) the store at root, normally
// <--root>/images.
func Open(root string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	for _, d := range []string{"layers", "tmp", "locks"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o700); err != nil {
			return nil, fmt.Errorf("create image store %s: %w", abs, err)
		}
	}
	if opts.Platform != "" {
		if _, err := v1.ParsePlatform(opts.Platform); err != nil {
			return nil, fmt.Errorf("invalid platform %q (use os/arch[/variant]): %w", opts.Platform, err)
		}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = max(2, runtime.NumCPU())
	}
	return &Store{root: abs, opts: opts}, nil
}

// Root returns the store's directory.
func (s *Store) Root() string { return s.root }

// LayerDir returns the directory of the layer stored under key.
func (s *Store) LayerDir(key string) string { return filepath.Join(s.root, "layers", key) }

// record is one image in index.json.
type record struct {
	Name     string      `json:"name"`
	Digest   string      `json:"digest"`
	Created  time.Time   `json:"created"`
	Stored   time.Time   `json:"stored"`
	Platform string      `json:"platform,omitempty"`
	Config   ImageConfig `json:"config"`
	Layers   []layerRec  `json:"layers"`
	// History is how the image was built, oldest step first (see
	// Store.History).
	History []HistoryEntry `json:"history,omitempty"`
}

type layerRec struct {
	Key    string `json:"key"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

type index struct {
	Version int      `json:"version"`
	Images  []record `json:"images"`
}

func (s *Store) readIndex() (*index, error) {
	data, err := os.ReadFile(filepath.Join(s.root, "index.json"))
	if errors.Is(err, os.ErrNotExist) {
		return &index{Version: 1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read image index: %w", err)
	}
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("image index %s is corrupt (remove it and pull again): %w", filepath.Join(s.root, "index.json"), err)
	}
	return &idx, nil
}

// updateIndex changes the index under its lock and replaces the file atomically.
func (s *Store) updateIndex(ctx context.Context, change func(*index) error) error {
	unlock, err := s.lock(ctx, "index", unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := change(idx); err != nil {
		return err
	}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.root, ".index-*.json")
	if err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		// A full disk: the index's own blocks take an index that is no
		// larger (rmi), so that removing images frees space.
		if fullfs.IsFull(err) && fullfs.Overwrite(filepath.Join(s.root, "index.json"), data) == nil {
			return nil
		}
		return fmt.Errorf("write image index: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write image index: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.root, "index.json")); err != nil {
		return fmt.Errorf("write image index: %w", err)
	}
	return nil
}

// lock takes a flock on locks/<name>.lock; how is unix.LOCK_SH or LOCK_EX.
// It waits, polling, until the lock is free or ctx ends.
func (s *Store) lock(ctx context.Context, name string, how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.root, "locks", name+".lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// canonicalName turns a user reference into the name the index stores
// (registry/repository:tag or @digest).
func (s *Store) canonicalName(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, s.nameOptions(ref)...)
	if err != nil {
		return nil, fmt.Errorf("%w: invalid image reference %q: %w", sbx.ErrInvalid, ref, err)
	}
	return r, nil
}

func (s *Store) nameOptions(ref string) []name.Option {
	for _, h := range s.opts.InsecureRegistries {
		if strings.HasPrefix(ref, h+"/") {
			return []name.Option{name.Insecure}
		}
	}
	return nil
}

// FamiliarName shortens a canonical name the way docker prints it
// (sbx.FamiliarName).
func FamiliarName(n string) string { return sbx.FamiliarName(n) }

// isDigestRef reports whether ref names an image by digest or digest
// prefix (as printed by sbx images) rather than by name.
func isDigestRef(ref string) bool {
	h := strings.TrimPrefix(ref, "sha256:")
	if len(h) < 12 || len(h) > 64 {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func matchDigest(ref, digest string) bool {
	return strings.HasPrefix(strings.TrimPrefix(digest, "sha256:"), strings.TrimPrefix(ref, "sha256:"))
}

// Resolve finds ref in the cache: a read of the index, nothing else. ref is
// a name (busybox, registry:5000/app:v1, name@sha256:...) or a digest or
// digest prefix of at least 12 hex digits. The error wraps ErrNotFound when
// the image is not cached.
func (s *Store) Resolve(ref string) (*Image, error) {
	rec, err := s.lookup(ref)
	if err != nil {
		return nil, err
	}
	return s.image(rec), nil
}

// lookup reads the index and finds ref in it.
func (s *Store) lookup(ref string) (*record, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	return s.find(idx, ref)
}

func (s *Store) find(idx *index, ref string) (*record, error) {
	if isDigestRef(ref) {
		var found *record
		for i := range idx.Images {
			if matchDigest(ref, idx.Images[i].Digest) {
				if found != nil && found.Digest != idx.Images[i].Digest {
					return nil, fmt.Errorf("digest prefix %q is ambiguous; give more digits", ref)
				}
				found = &idx.Images[i]
			}
		}
		if found != nil {
			return found, nil
		}
	}
	r, err := s.canonicalName(ref)
	if err != nil {
		if isDigestRef(ref) {
			return nil, fmt.Errorf("image %q not found in cache: %w", ref, ErrNotFound)
		}
		return nil, err
	}
	want := r.Name()
	for i := range idx.Images {
		if idx.Images[i].Name == want {
			return &idx.Images[i], nil
		}
	}
	// name@digest also matches an image stored under a tag with that digest.
	if d, ok := r.(name.Digest); ok {
		for i := range idx.Images {
			if idx.Images[i].Digest == d.DigestStr() && strings.HasPrefix(idx.Images[i].Name, d.Context().Name()) {
				return &idx.Images[i], nil
			}
		}
	}
	return nil, errkind.New(fmt.Sprintf("image %q is not in the cache: sbx pull %s or sbx import it", ref, ref), ErrNotFound)
}

func (s *Store) image(rec *record) *Image {
	img := &Image{
		Name:     rec.Name,
		Digest:   rec.Digest,
		Created:  rec.Created,
		Platform: rec.Platform,
		Config:   rec.Config,
	}
	for _, l := range rec.Layers {
		img.Size += l.Size
		img.LayerDirs = append(img.LayerDirs, s.LayerDir(l.Key))
		img.DiffIDs = append(img.DiffIDs, l.DiffID)
	}
	return img
}

// List returns the cached images, sorted by name.
func (s *Store) List() ([]*Image, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := make([]*Image, 0, len(idx.Images))
	for i := range idx.Images {
		out = append(out, s.image(&idx.Images[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes an image from the index: by name only that name, by digest
// every name of that digest. It returns the removed names. The layers stay
// until GC removes the ones no image uses.
func (s *Store) Remove(ctx context.Context, ref string) ([]string, error) {
	var removed []string
	err := s.updateIndex(ctx, func(idx *index) error {
		rec, err := s.find(idx, ref)
		if err != nil {
			return err
		}
		byDigest := isDigestRef(ref) && rec.Name != ref
		target, digest := rec.Name, rec.Digest
		kept := idx.Images[:0]
		for _, r := range idx.Images {
			if r.Name == target || (byDigest && r.Digest == digest) {
				removed = append(removed, r.Name)
				continue
			}
			kept = append(kept, r)
		}
		idx.Images = kept
		return nil
	})
	return removed, err
}

// GCResult reports what GC removed.
type GCResult struct {
	RemovedLayers []string // keys of the removed layers
	FreedBytes    int64    // their apparent size
	KeptInUse     []string // unreferenced layers kept because a mount uses them
}

// Hold takes the store's lock shared until release is called: GC waits
// for it. Hold it from resolving an image until its layers are protected
// otherwise (mounted, or recorded where GC's inUse reports them), so that
// a concurrent rmi and GC cannot remove layers about to be used.
func (s *Store) Hold(ctx context.Context) (release func(), err error) {
	return s.lock(ctx, "store", unix.LOCK_SH)
}

// Upload prefixes the name of an archive a caller stores in Root while it
// holds Hold, to import it (an upload to sbx serve, sbx load from stdin);
// RemoveDebris removes those whose importer died.
const Upload = ".upload-"

// RemoveDebris removes what interrupted pulls, imports and saves left in
// the store (staging directories under tmp/, uploaded archives in Root)
// and returns their names. It acts only when the store's lock is free
// within a moment (no pull, import, save or holder of Hold runs), and
// then removes nothing else: a busy store is left for the next call.
func (s *Store) RemoveDebris(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	unlock, err := s.lock(ctx, "store", unix.LOCK_EX)
	if err != nil {
		return nil
	}
	defer unlock()
	var removed []string
	tmps, _ := os.ReadDir(filepath.Join(s.root, "tmp"))
	for _, t := range tmps {
		if err := os.RemoveAll(filepath.Join(s.root, "tmp", t.Name())); err == nil {
			removed = append(removed, "tmp/"+t.Name())
		}
	}
	top, _ := os.ReadDir(s.root)
	for _, e := range top {
		if strings.HasPrefix(e.Name(), Upload) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(s.root, e.Name())); err == nil {
				removed = append(removed, e.Name())
			}
		}
	}
	return removed
}

// GC removes the layers that no image in the index uses, except layers a
// mount on this host still uses (an overlay of a running sandbox), layers
// inUse reports (those of stopped sandboxes, whose overlays are not
// mounted), and leftovers of interrupted pulls. It waits for running
// pulls, imports and holders of Hold, and calls inUse (if not nil) with
// the store locked exclusively; inUse returns layer directories.
func (s *Store) GC(ctx context.Context, inUse func() ([]string, error)) (GCResult, error) {
	var res GCResult
	unlock, err := s.lock(ctx, "store", unix.LOCK_EX)
	if err != nil {
		return res, err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return res, err
	}
	used := map[string]bool{}
	for _, r := range idx.Images {
		for _, l := range r.Layers {
			used[l.Key] = true
		}
	}
	if inUse != nil {
		dirs, err := inUse()
		if err != nil {
			return res, fmt.Errorf("list the layers sandboxes use (nothing was removed): %w", err)
		}
		for _, d := range dirs {
			if filepath.Dir(filepath.Clean(d)) == filepath.Join(s.root, "layers") {
				used[filepath.Base(d)] = true
			}
		}
	}
	mounted := mountedPaths()
	entries, err := os.ReadDir(filepath.Join(s.root, "layers"))
	if err != nil {
		return res, fmt.Errorf("list layers: %w", err)
	}
	for _, e := range entries {
		key := e.Name()
		if !e.IsDir() {
			// Metadata of a layer whose directory is gone.
			if k, ok := strings.CutSuffix(key, ".json"); ok && !used[k] && !exists(s.LayerDir(k)) {
				_ = os.Remove(filepath.Join(s.root, "layers", key))
			}
			continue
		}
		if used[key] {
			continue
		}
		dir := s.LayerDir(key)
		if mounted(dir) {
			res.KeptInUse = append(res.KeptInUse, key)
			continue
		}
		size := dirSize(dir)
		// Rename first: a crash mid-removal must not leave a partial layer
		// that looks complete.
		trash := filepath.Join(s.root, "tmp", "gc-"+key)
		if err := os.Rename(dir, trash); err != nil {
			return res, fmt.Errorf("remove layer %s: %w", key, err)
		}
		if err := os.RemoveAll(trash); err != nil {
			return res, fmt.Errorf("remove layer %s: %w", key, err)
		}
		_ = os.Remove(filepath.Join(s.root, "layers", key+".json"))
		res.RemovedLayers = append(res.RemovedLayers, key)
		res.FreedBytes += size
	}
	// With the store lock held exclusively no pull runs: tmp/ is debris.
	tmps, _ := os.ReadDir(filepath.Join(s.root, "tmp"))
	for _, t := range tmps {
		if err := os.RemoveAll(filepath.Join(s.root, "tmp", t.Name())); err != nil {
			slog.Warn("remove leftover of an interrupted pull", "path", t.Name(), "err", err)
		}
	}
	return res, nil
}

// mountedPaths returns a function reporting whether a directory is the
// mount point, root or source of one of this host's mounts, or a path in
// their options (overlay lowerdir, upperdir, workdir).
func mountedPaths() func(string) bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	return mountinfoPaths(string(data))
}

// mountinfoPaths parses mountinfo text (see proc_pid_mountinfo(5)): its
// fields are space-separated, options comma-separated, and the kernel
// escapes space, tab, newline, backslash (and in options ',' and '=') as
// \ooo octal. Overlay separates lower dirs with ':' and keeps the
// backslash that escapes a ':' in a path.
func mountinfoPaths(text string) func(string) bool {
	paths := map[string]bool{}
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		if len(fields) < 10 {
			continue
		}
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+3 >= len(fields) {
			continue
		}
		paths[unescapeOctal(fields[3])] = true
		paths[unescapeOctal(fields[4])] = true
		paths[unescapeOctal(fields[sep+2])] = true
		for _, opt := range strings.Split(fields[sep+3], ",") {
			opt = unescapeOctal(opt)
			if _, v, ok := strings.Cut(opt, "="); ok {
				opt = v
			}
			for _, p := range splitEscaped(opt, ':') {
				paths[p] = true
			}
		}
	}
	return func(dir string) bool { return paths[filepath.Clean(dir)] }
}

// unescapeOctal undoes the kernel's \ooo escapes of mountinfo fields.
func unescapeOctal(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// splitEscaped splits s at each sep not preceded by a backslash, and
// drops the backslashes that escape a character.
func splitEscaped(s string, sep byte) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			cur.WriteByte(s[i+1])
			i++
			continue
		}
		if c == sep {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	return append(out, cur.String())
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
