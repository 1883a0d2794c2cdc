package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

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

func (e buildEngine) CacheDir(id string, mode os.FileMode, uid, gid int) (string, func(), error) {
	parent := e.cacheParent()
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", nil, err
	}
	dir := filepath.Join(parent, build.CacheDirName(id))
	// A shared lock on its lock file while a step uses it: prune takes it
	// exclusively and leaves busy caches alone.
	lf, err := os.OpenFile(dir+".lock", os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_SH); err != nil {
		lf.Close()
		return "", nil, err
	}
	release := func() { lf.Close() }
	err = os.Mkdir(dir, mode.Perm())
	switch {
	case errors.Is(err, os.ErrExist):
		return dir, release, nil
	case err != nil:
		release()
		return "", nil, err
	}
	if err := os.Chmod(dir, mode.Perm()); err != nil {
		release()
		return "", nil, err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		release()
		return "", nil, err
	}
	return dir, release, nil
}

func (e buildEngine) cacheParent() string { return filepath.Join(e.buildDir(), "cache") }

// cacheMountBytes is what the cache mounts' directories hold.
func (e buildEngine) cacheMountBytes() int64 {
	var n int64
	_ = filepath.WalkDir(e.cacheParent(), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// isBuildStep reports whether the image name is one of a build's steps.
func isBuildStep(name string) bool {
	return strings.HasPrefix(imagecache.FamiliarName(name), sbx.BuildPrefix+":")
}

// PruneBuildCache removes the build step images (sbx-build:*), the cache
// mounts no running step holds, and then the layers no image uses.
func (h *Host) PruneBuildCache(ctx context.Context) (*sbx.BuildPruneReport, error) {
	images, err := h.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	rep := &sbx.BuildPruneReport{}
	var errs []error
	for _, img := range images {
		if !isBuildStep(img.Name) {
			continue
		}
		if err := h.RemoveImage(ctx, img.Name); err != nil && !errors.Is(err, sbx.ErrImageNotFound) {
			errs = append(errs, err)
			continue
		}
		rep.Images++
	}
	e := buildEngine{h}
	entries, _ := os.ReadDir(e.cacheParent())
	for _, d := range entries {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(e.cacheParent(), d.Name())
		lf, err := os.OpenFile(dir+".lock", os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			lf.Close()
			continue // a running step uses it
		}
		var n int64
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if fi, ierr := d.Info(); err == nil && ierr == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
		err = os.RemoveAll(dir)
		lf.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the cache mount %s: %w", dir, err))
			continue
		}
		rep.CacheMounts++
		rep.CacheMountBytes += n
	}
	gc, err := h.GCImages(ctx)
	if err != nil {
		errs = append(errs, err)
	} else {
		rep.Layers = *gc
	}
	return rep, errors.Join(errs...)
}

var _ sbx.BuildCachePruner = (*Host)(nil)

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
