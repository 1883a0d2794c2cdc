package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
)

// imagesStore opens a fresh store under a temporary directory.
func imagesStore(t *testing.T, opts imagecache.Options) *imagecache.Store {
	t.Helper()
	s, err := imagecache.Open(filepath.Join(t.TempDir(), "images"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// imagesMount mounts a read-only overlay of img's layers and returns the
// merged root; it is unmounted when the test ends.
func imagesMount(t *testing.T, img *imagecache.Image) string {
	t.Helper()
	lowers := make([]string, 0, len(img.LayerDirs)+1)
	for i := len(img.LayerDirs) - 1; i >= 0; i-- {
		lowers = append(lowers, img.LayerDirs[i])
	}
	if len(lowers) == 1 {
		// An overlay without upper dir needs two lower dirs.
		lowers = append(lowers, t.TempDir())
	}
	target := t.TempDir()
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(lowers, ":")); err != nil {
		t.Fatalf("mount overlay of the image layers (overlayfs with trusted xattrs is required): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
	return target
}

// imagesDevices walks root and returns the device nodes that are not
// overlayfs whiteouts (0/0 character devices) and the number of whiteouts.
func imagesDevices(t *testing.T, root string) (devices []string, whiteouts int) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeDevice == 0 {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			whiteouts++
			return nil
		}
		devices = append(devices, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return devices, whiteouts
}

// imagesReadFile reads a file or fails the test.
func imagesReadFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func imagesStat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}
