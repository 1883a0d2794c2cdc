package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
)

// DefaultImage is the name under which the bench imports its default
// busybox root into its own image store.
const DefaultImage = "sbx-bench/busybox:latest"

// DefaultStateRoot is the sbx --root of the bench's own image store, so
// that the default workload never touches the user's images.
const DefaultStateRoot = "/var/cache/sbx-bench/root"

// ImportRoot makes sure store holds name: an image of the root directory
// dir (imported from a tarball of it once). It returns the image.
func ImportRoot(ctx context.Context, store *imagecache.Store, dir, name string) (*imagecache.Image, error) {
	if img, err := store.Resolve(name); err == nil {
		return img, nil
	}
	f, err := os.CreateTemp("", "sbx-bench-rootfs-*.tar")
	if err != nil {
		return nil, err
	}
	f.Close()
	defer os.Remove(f.Name())
	if out, err := exec.CommandContext(ctx, "tar", "-C", dir, "--numeric-owner", "-cf", f.Name(), ".").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar %s: %w: %s", dir, err, lastLines(string(out), 2))
	}
	img, err := store.Import(ctx, f.Name(), name, nil)
	if err != nil {
		return nil, fmt.Errorf("import the workload image: %w", err)
	}
	return img, nil
}

// UseImage points w at a cached image: sbx runs the image (stateRoot is
// the sbx --root whose store holds it) and the other runtimes its unpacked
// root: the layer itself for a one-layer image, otherwise a read-only
// overlay of the layers mounted under mountDir. The returned function
// unmounts it.
func UseImage(w *Workload, store *imagecache.Store, stateRoot, ref, mountDir string) (func() error, error) {
	img, err := store.Resolve(ref)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w (sbx pull or sbx import it first)", ref, err)
	}
	if len(img.LayerDirs) == 0 {
		return nil, fmt.Errorf("image %q has no layers", ref)
	}
	w.Image, w.StateRoot, w.Lowers = ref, stateRoot, img.LayerDirs
	w.imageStore = store
	if len(img.LayerDirs) == 1 {
		w.Rootfs = img.LayerDirs[0]
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(mountDir, 0o700); err != nil {
		return nil, err
	}
	top := slices.Clone(img.LayerDirs)
	slices.Reverse(top)
	if err := unix.Mount("overlay", mountDir, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(top, ":")); err != nil {
		return nil, fmt.Errorf("mount the image's layers for the other runtimes: %w", err)
	}
	w.Rootfs = mountDir
	return func() error {
		return errors.Join(unix.Unmount(mountDir, unix.MNT_DETACH), os.Remove(mountDir))
	}, nil
}

// imageProbe times resolving the workload's image in the cache: the
// image lookup of every sbx run IMAGE.
func imageProbe(w Workload) []Probe {
	if w.imageStore == nil {
		return nil
	}
	return []Probe{{Name: ProbeImage, Note: "in the sbx process of every run of an image: a read of the cache's index",
		Once: func(context.Context) (time.Duration, error) {
			t0 := time.Now()
			_, err := w.imageStore.Resolve(w.Image)
			return time.Since(t0), err
		}}}
}

// PrepareWorkload sets the root filesystem or image of w: the directory
// rootfs, the image ref cached under the sbx --root stateRoot, or by
// default a busybox root imported into the bench's own image store. The
// returned function undoes what it mounted.
func PrepareWorkload(ctx context.Context, w *Workload, rootfs, ref, stateRoot string) (func() error, error) {
	none := func() error { return nil }
	if rootfs != "" {
		root, err := filepath.Abs(rootfs)
		w.Rootfs = root
		return none, err
	}
	if ref == "" {
		dir, err := BusyboxRoot(DefaultRootDir)
		if err != nil {
			return none, err
		}
		stateRoot, ref = DefaultStateRoot, DefaultImage
		store, err := imagecache.Open(filepath.Join(stateRoot, "images"), imagecache.Options{})
		if err != nil {
			return none, fmt.Errorf("open the bench's image store: %w", err)
		}
		if _, err := ImportRoot(ctx, store, dir, ref); err != nil {
			return none, err
		}
	}
	store, err := imagecache.Open(filepath.Join(stateRoot, "images"), imagecache.Options{})
	if err != nil {
		return none, fmt.Errorf("open the image store: %w", err)
	}
	return UseImage(w, store, stateRoot, ref, filepath.Join(w.RunRoot, fmt.Sprintf("bench-image-%d", os.Getpid())))
}
