package rootfs

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// PrivateDir makes dir (created if needed) a small tmpfs of its own, unless
// it is one already. A bind mount of a directory names its path inside its
// file system in the sandbox's /proc/self/mountinfo; from a file system of
// its own that path is "/", so the sandbox learns nothing of the host's
// directory layout. Cleanup unmounts it with the rest.
func PrivateDir(dir string, sizeBytes int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	if st.Dev != parent.Dev {
		return nil // already a mount point (a sandbox started again)
	}
	opts := fmt.Sprintf("size=%d,mode=0700", sizeBytes)
	if err := unix.Mount("sbx", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount a private tmpfs at %s: %w", dir, err)
	}
	return nil
}
