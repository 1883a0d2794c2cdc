package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sbxrun/sbx/imagecache"
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
