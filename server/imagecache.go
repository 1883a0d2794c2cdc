package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/server/api"
)

// ImageCache serves the image routes from an image cache.
func ImageCache(s *imagecache.Store) ImageStore { return cacheImages{s} }

type cacheImages struct{ s *imagecache.Store }

func toAPIImage(img *imagecache.Image) api.Image {
	return api.Image{Name: img.Name, Digest: img.Digest, Created: img.Created, Platform: img.Platform, Size: img.Size}
}

// imageError maps the cache's errors to replies. A registry refusing its
// credentials is a 502: the caller's own token was fine.
func imageError(err error) error {
	if err == nil {
		return nil
	}
	se := &StatusError{Status: http.StatusInternalServerError, Code: api.CodeInternal, Message: err.Error(), Err: err}
	switch {
	case errors.Is(err, imagecache.ErrNotFound):
		se.Status, se.Code = http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, imagecache.ErrAuth):
		se.Status, se.Code = http.StatusBadGateway, "registry_auth"
	case errors.Is(err, imagecache.ErrUnreachable):
		se.Status, se.Code = http.StatusBadGateway, "registry_unreachable"
	case errors.Is(err, imagecache.ErrUnsupported):
		se.Status, se.Code = http.StatusUnprocessableEntity, api.CodeInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		se.Status, se.Code = http.StatusServiceUnavailable, api.CodeUnavailable
	case strings.Contains(err.Error(), "invalid image reference"):
		se.Status, se.Code = http.StatusUnprocessableEntity, api.CodeInvalid
	}
	return se
}

func (c cacheImages) Pull(ctx context.Context, ref string, progress func(api.PullProgress)) (api.Image, error) {
	var pf imagecache.ProgressFunc
	if progress != nil {
		pf = func(p imagecache.Progress) {
			progress(api.PullProgress{Layer: p.Layer, Index: p.Index, Phase: string(p.Phase), Current: p.Current, Total: p.Total})
		}
	}
	img, err := c.s.Pull(ctx, ref, pf)
	if err != nil {
		return api.Image{}, imageError(err)
	}
	return toAPIImage(img), nil
}

func (c cacheImages) List(ctx context.Context) ([]api.Image, error) {
	list, err := c.s.List()
	if err != nil {
		return nil, imageError(err)
	}
	out := make([]api.Image, 0, len(list))
	for _, img := range list {
		out = append(out, toAPIImage(img))
	}
	return out, nil
}

func (c cacheImages) Remove(ctx context.Context, ref string) error {
	_, err := c.s.Remove(ctx, ref)
	return imageError(err)
}

func (c cacheImages) Inspect(ctx context.Context, ref string) (api.ImageDetail, error) {
	img, err := c.s.Resolve(ref)
	if err != nil {
		return api.ImageDetail{}, imageError(err)
	}
	cfg := img.Config
	return api.ImageDetail{Name: img.Name, Digest: img.Digest, Created: img.Created, Platform: img.Platform, Size: img.Size,
		Config: api.ImageConfig{Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: cfg.Env, WorkingDir: cfg.WorkingDir,
			User: cfg.User, Labels: cfg.Labels, StopSignal: cfg.StopSignal},
		LayerDirs: img.LayerDirs, DiffIDs: img.DiffIDs}, nil
}

func (c cacheImages) GC(ctx context.Context, inUse func() ([]string, error)) (api.ImageGCReport, error) {
	res, err := c.s.GC(ctx, inUse)
	if err != nil {
		return api.ImageGCReport{}, imageError(err)
	}
	return api.ImageGCReport{RemovedLayers: nonNil(res.RemovedLayers), FreedBytes: res.FreedBytes, KeptInUse: nonNil(res.KeptInUse)}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Import streams body to a temporary file in the cache's root (not its
// tmp/, which GC empties) and imports it. Archives the cache cannot read
// are 422.
func (c cacheImages) Import(ctx context.Context, body io.Reader, name string) (api.Image, error) {
	f, err := os.CreateTemp(c.s.Root(), ".upload-*")
	if err != nil {
		return api.Image{}, fmt.Errorf("store the uploaded archive: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store the uploaded archive: %w", cerr)
	}
	if err != nil {
		return api.Image{}, fmt.Errorf("receive the archive: %w", err)
	}
	img, err := c.s.Import(ctx, f.Name(), name, nil)
	if err != nil {
		se := imageError(err).(*StatusError)
		if se.Status == http.StatusInternalServerError {
			se.Status, se.Code = http.StatusUnprocessableEntity, api.CodeInvalid
		}
		se.Message = "import: " + se.Message
		return api.Image{}, se
	}
	return toAPIImage(img), nil
}
