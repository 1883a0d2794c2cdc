package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox/state"
)

// NewImageSource adapts the image cache to the Manager: references are
// resolved with policy (pulling when it allows), commits become new images
// in the cache.
func NewImageSource(s *imagecache.Store, policy imagecache.PullPolicy) ImageSource {
	return &cacheSource{s: s, policy: policy}
}

type cacheSource struct {
	s      *imagecache.Store
	policy imagecache.PullPolicy
}

func (c *cacheSource) Resolve(ctx context.Context, ref string) (*ResolvedImage, error) {
	img, err := c.s.Ensure(ctx, ref, c.policy, nil)
	if err != nil {
		if errors.Is(err, imagecache.ErrNotFound) {
			return nil, fmt.Errorf("%w: image %q is not in the cache and could not be pulled: %w (sbx pull or sbx import it)", ErrInvalid, ref, err)
		}
		return nil, err
	}
	return resolved(img), nil
}

// Hold keeps image GC waiting until release is called.
func (c *cacheSource) Hold(ctx context.Context) (release func(), err error) {
	return c.s.Hold(ctx)
}

func (c *cacheSource) Commit(ctx context.Context, base, name string, layer io.Reader) (*ResolvedImage, error) {
	b, err := c.s.Resolve(base)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", base, err)
	}
	img, err := c.s.Commit(ctx, b, name, layer, nil)
	if err != nil {
		return nil, err
	}
	return resolved(img), nil
}

func resolved(img *imagecache.Image) *ResolvedImage {
	return &ResolvedImage{
		Ref:     imagecache.FamiliarName(img.Name),
		Digest:  img.Digest,
		Layers:  img.LayerDirs,
		Env:     img.Config.Env,
		Workdir: img.Config.WorkingDir,
		User:    img.Config.User,
	}
}

// imageHolder is an ImageSource whose GC can be held off (NewImageSource's).
type imageHolder interface {
	Hold(ctx context.Context) (release func(), err error)
}

// holdImages holds the image source's GC off while an image is resolved
// and recorded; release is never nil.
func (m *Manager) holdImages(ctx context.Context, opts Options) (release func(), err error) {
	h, ok := m.cfg.Images.(imageHolder)
	if !ok || opts.Image == "" {
		return func() {}, nil
	}
	release, err = h.Hold(ctx)
	if err != nil {
		return nil, fmt.Errorf("hold the image store: %w", err)
	}
	return release, nil
}

// ImageLayers returns the image layer directories of every sandbox on
// record, running or stopped (a stopped sandbox's overlay is not mounted
// but its next start needs them), and of the live one-shot runs under the
// run root: image GC must keep them. Mounts do not name their layers (see
// rootfs), so a record that cannot be read is an error: its layers are
// unknown and GC must remove nothing.
func (m *Manager) ImageLayers() ([]string, error) {
	entries, err := state.ReadAll[Sandbox](m.store)
	if err != nil {
		return nil, fmt.Errorf("read sandbox records: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		switch {
		case e.Err == nil:
			if e.Record.Image != nil {
				dirs = append(dirs, e.Record.Image.Layers...)
			}
		case errors.Is(e.Err, state.ErrCorruptRecord):
			return nil, fmt.Errorf("the record of sandbox %s is unreadable, so the image layers it uses are unknown; sbx rm -f it first: %w", e.ID, e.Err)
		}
	}
	runs, err := liveRunLayers(m.store.RunRoot())
	if err != nil {
		return nil, err
	}
	return append(dirs, runs...), nil
}
