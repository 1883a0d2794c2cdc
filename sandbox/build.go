package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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

func (e buildEngine) CommitStep(ctx context.Context, ref, name string, cfg sbx.ImageConfig, createdBy string, drop []string) (*sbx.Image, error) {
	l, sb, err := e.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	c := imageConfig(cfg)
	img, err := e.commitLocked(ctx, l, sb, name, &c, createdBy, drop)
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

func (e buildEngine) Scratch(ctx context.Context, name string, cfg sbx.ImageConfig) (*sbx.Image, error) {
	store, err := e.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := store.Empty(ctx, name, imageConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("store the empty image: %w", err)
	}
	return contractImage(img, true), nil
}

// buildDir is where builds keep their files: the cache mounts, and the
// host side of one step's bind mounts.
func (e buildEngine) buildDir() string { return filepath.Join(e.store.Root(), "build") }

// secretDir is where a step's secrets are kept while it runs: under the
// run root, in memory.
func (e buildEngine) secretDir() string { return filepath.Join(e.store.RunRoot(), "build-secrets") }

func (e buildEngine) CacheDir(id string, mode os.FileMode, uid, gid int) (string, error) {
	parent := filepath.Join(e.buildDir(), "cache")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, build.CacheDirName(id))
	if err := os.Mkdir(dir, mode.Perm()); err != nil {
		if errors.Is(err, os.ErrExist) {
			return dir, nil
		}
		return "", err
	}
	if err := os.Chmod(dir, mode.Perm()); err != nil {
		return "", err
	}
	return dir, os.Chown(dir, uid, gid)
}

func (e buildEngine) TempDir(secret bool) (string, error) {
	parent := filepath.Join(e.buildDir(), "tmp")
	if secret {
		parent = e.secretDir()
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(parent, fmt.Sprintf("step-%d-", os.Getpid()))
}

// sweepBuildTemp removes the step directories (bind mounts, secrets) of
// builds whose process died, and returns their names.
func (h *Host) sweepBuildTemp() []string {
	e := buildEngine{h}
	var out []string
	for _, parent := range []string{filepath.Join(e.buildDir(), "tmp"), e.secretDir()} {
		entries, _ := os.ReadDir(parent)
		for _, d := range entries {
			pidStr, _, ok := strings.Cut(strings.TrimPrefix(d.Name(), "step-"), "-")
			pid, err := strconv.Atoi(pidStr)
			if !ok || err != nil || pid <= 0 {
				continue
			}
			if _, err := os.Stat(filepath.Join("/proc", pidStr)); err == nil {
				continue // its build is still running
			}
			if os.RemoveAll(filepath.Join(parent, d.Name())) == nil {
				out = append(out, d.Name())
			}
		}
	}
	return out
}

// Create makes a build sandbox under the host's policy, which here also
// allows the volumes the build made itself (cache, bind and secret mounts).
func (e buildEngine) Create(ctx context.Context, o sbx.Options) (*sbx.Sandbox, error) {
	p := e.cfg.Policy
	if p != nil && len(o.Volumes) > 0 {
		cp := *p
		cp.AllowedHostDirs = append(slices.Clone(p.AllowedHostDirs), e.buildDir(), e.secretDir())
		p = &cp
	}
	return e.create(ctx, o, p, "")
}

// imageConfig is the image cache's form of a contract config.
func imageConfig(c sbx.ImageConfig) imagecache.ImageConfig {
	return imagecache.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal, ExposedPorts: c.ExposedPorts,
		Volumes: c.Volumes, Shell: c.Shell, Healthcheck: c.Healthcheck, OnBuild: c.OnBuild}
}

var _ sbx.Builder = (*Host)(nil)
