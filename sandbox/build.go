package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/build"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Build builds an image from a Dockerfile (see package build): each RUN,
// COPY, ADD and WORKDIR runs in a throw-away build sandbox created under
// the host's policy, and each step's result is kept in the image cache as
// sbx-build:<key> so that an unchanged build does no work.
func (h *Host) Build(ctx context.Context, o sbx.BuildOptions) (*sbx.BuildResult, error) {
	if _, err := h.imageStore(); err != nil {
		return nil, err
	}
	return build.Build(ctx, buildEngine{h}, o)
}

// buildEngine is the host as a build's engine.
type buildEngine struct{ *Host }

func (e buildEngine) Image(ctx context.Context, ref, pull string) (*sbx.Image, error) {
	o := sbx.Options{Image: ref, Pull: pull}
	root, release, err := e.resolveRoot(ctx, &o, nil)
	release()
	if err != nil {
		return nil, err
	}
	return e.InspectImage(ctx, root.info.Digest)
}

func (e buildEngine) Cached(ctx context.Context, name string) (*sbx.Image, error) {
	img, err := e.InspectImage(ctx, name)
	if errors.Is(err, sbx.ErrImageNotFound) {
		return nil, nil
	}
	return img, err
}

func (e buildEngine) LockStep(ctx context.Context, key string) (func(), error) {
	dir := filepath.Join(e.store.Root(), "build")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return state.LockFile(ctx, filepath.Join(dir, filepath.Base(key)+".lock"))
}

func (e buildEngine) CommitStep(ctx context.Context, ref, name string, cfg sbx.ImageConfig, createdBy string) (*sbx.Image, error) {
	l, sb, err := e.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	c := imageConfig(cfg)
	img, err := e.commitLocked(ctx, l, sb, name, &c, createdBy)
	if err != nil {
		return nil, err
	}
	return contractImage(img, true), nil
}

func (e buildEngine) Configure(ctx context.Context, image, name string, cfg sbx.ImageConfig, createdBy string) (*sbx.Image, error) {
	store, err := e.imageStore()
	if err != nil {
		return nil, err
	}
	base, err := store.Resolve(image)
	if err != nil {
		return nil, err
	}
	c := imageConfig(cfg)
	img, err := store.CommitStep(ctx, base, name, nil, &c, createdBy)
	if err != nil {
		return nil, fmt.Errorf("store the build's config: %w", err)
	}
	return contractImage(img, true), nil
}

// imageConfig is the image cache's form of a contract config.
func imageConfig(c sbx.ImageConfig) imagecache.ImageConfig {
	return imagecache.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal, ExposedPorts: c.ExposedPorts,
		Volumes: c.Volumes, Shell: c.Shell, Healthcheck: c.Healthcheck}
}

var _ sbx.Builder = (*Host)(nil)
