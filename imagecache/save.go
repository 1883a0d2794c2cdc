package imagecache

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache/pack"
)

// Save writes the cached images refs to w as an OCI archive (an OCI image
// layout in a tar, as docker save --format oci, skopeo and sbx import read
// it), each named by its reference. The layers are packed again from the
// store's unpacked directories, so their digests differ from the
// registry's while their contents are the same.
func (s *Store) Save(ctx context.Context, refs []string, w io.Writer) error {
	if len(refs) == 0 {
		return fmt.Errorf("%w: save: name at least one image", sbx.ErrInvalid)
	}
	recs := make([]*record, 0, len(refs))
	for _, ref := range refs {
		rec, err := s.lookup(ref)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	// The layers must stay while they are read.
	unlock, err := s.lock(ctx, "store", unix.LOCK_SH)
	if err != nil {
		return err
	}
	defer unlock()
	tmp, err := os.MkdirTemp(filepath.Join(s.root, "tmp"), "save-")
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	for _, rec := range recs {
		img, err := s.ociImage(rec)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			annotationRefName:   FamiliarName(rec.Name),
			annotationImageName: rec.Name,
		})); err != nil {
			return fmt.Errorf("save %s: %w", FamiliarName(rec.Name), err)
		}
	}
	return tarDir(w, tmp)
}

// ociImage rebuilds an OCI image from a stored record.
func (s *Store) ociImage(rec *record) (v1.Image, error) {
	layers := make([]v1.Layer, 0, len(rec.Layers))
	for _, l := range rec.Layers {
		dir := s.LayerDir(l.Key)
		if !exists(dir) {
			return nil, fmt.Errorf("save %s: layer %s is gone; pull the image again", FamiliarName(rec.Name), l.Key)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(pack.Write(pw, dir, nil)) }()
			return pr, nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("save %s: %w", FamiliarName(rec.Name), err)
		}
		layers = append(layers, layer)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	goos, arch, _ := strings.Cut(rec.Platform, "/")
	arch, variant, _ := strings.Cut(arch, "/")
	cf.OS, cf.Architecture, cf.Variant = goos, arch, variant
	cf.Created = v1.Time{Time: rec.Created}
	c := rec.Config
	cf.Config = v1.Config{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal, ExposedPorts: set(c.ExposedPorts),
		Volumes: set(c.Volumes), Shell: c.Shell, Healthcheck: healthConfig(c.Healthcheck), OnBuild: c.OnBuild}
	// History goes along only where it matches the layers, as readers
	// pair its non-empty steps with them.
	cf.History = nil
	if rec.historyMatches() {
		for _, h := range rec.History {
			cf.History = append(cf.History, v1.History{Created: v1.Time{Time: h.Created}, CreatedBy: h.CreatedBy, Comment: h.Comment, EmptyLayer: h.EmptyLayer})
		}
	}
	return mutate.ConfigFile(img, cf)
}

// tarDir writes the files under dir to w as a tar.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		return fmt.Errorf("save: write the archive: %w", err)
	}
	return tw.Close()
}

// set is the OCI config form of a list (ExposedPorts, Volumes).
func set(keys []string) map[string]struct{} {
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		m[k] = struct{}{}
	}
	return m
}

func healthConfig(h *sbx.Healthcheck) *v1.HealthConfig {
	if h == nil {
		return nil
	}
	return &v1.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
}
