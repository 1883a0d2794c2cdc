package isolate

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
)

// The sandbox's view of its cgroups at /sys/fs/cgroup is, on a v1 or
// hybrid host, a small read-only tmpfs with one bind of the sandbox's
// directory in each viewed hierarchy. Made by libcontainer's init, each
// of those binds costs it about 180 syscalls of path checks
// (openat2, readlink of /proc/thread-self/fd, statx mount ids) for what
// the host does in two plain mount calls. MountCgroupView builds the
// whole view on the host side instead, in the mount namespace the
// container is started from, and the sandbox gets it as one recursive
// bind: one mount for its init to check instead of six.

// viewFlags are the flags of every mount of the view.
const viewFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC

// MountCgroupView makes dir (created if missing; it must be empty) show
// sandbox id's cgroup directories as the sandbox sees them at
// /sys/fs/cgroup, for Spec.CgroupView: a read-only tmpfs holding a
// read-only bind of id's directory in each viewed hierarchy (created here;
// libcontainer's cgroup manager joins the existing directories). It
// mounts in the calling thread's mount namespace, which must be the one
// the container is started from (the sandbox's own, or the host's for a
// one-shot run). On a pure cgroup v2 host it does nothing and returns
// false: there the sandbox's view is already one bind of its directory.
// UnmountCgroupView undoes the mounts; the cgroup directories go with the
// container (libcontainer's Destroy, cgroup.SandboxLeftovers).
func MountCgroupView(dir, id string) (bool, error) {
	return mountCgroupView(dir, id, cgroup.Mountpoints())
}

func mountCgroupView(dir, id string, mps []string) (_ bool, err error) {
	if pureV2(mps) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("cgroup view of %s: %w", id, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", viewFlags, "mode=755,size=4k,nr_inodes=64"); err != nil {
		return false, fmt.Errorf("cgroup view of %s: mount a tmpfs on %s: %w", id, dir, err)
	}
	defer func() {
		if err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	}()
	for _, mp := range mps {
		if !viewed(mp) {
			continue
		}
		src := filepath.Join(mp, cgroup.SandboxPath(id))
		dst := filepath.Join(dir, filepath.Base(mp))
		if err := os.MkdirAll(src, 0o755); err != nil {
			return false, fmt.Errorf("cgroup view of %s: create its cgroup %s: %w", id, src, err)
		}
		if err := os.Mkdir(dst, 0o755); err != nil {
			return false, fmt.Errorf("cgroup view of %s: %w", id, err)
		}
		if err := bindReadOnly(src, dst); err != nil {
			return false, fmt.Errorf("cgroup view of %s: %w", id, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|viewFlags, ""); err != nil {
		return false, fmt.Errorf("cgroup view of %s: remount %s read-only: %w", id, dir, err)
	}
	return true, nil
}

// WarmCgroups readies sandbox id's start for its cgroup moves: it makes
// the cgroup directories its view shows (MountCgroupView then finds them
// made; errors are left for it to report) and starts cgroup.WarmAttach,
// so that the RCU grace period the first move after a pause waits for
// runs beside the rest of the start's set-up instead of inside
// libcontainer's start. The directories come first because the kernel
// holds its cgroup mutex while the move waits, and a mkdir would wait
// with it. The caller must have recorded the sandbox's cgroups: they go
// with its container, or with sbx gc (cgroup.SandboxLeftovers).
func WarmCgroups(id string) {
	if mps := cgroup.Mountpoints(); !pureV2(mps) {
		for _, mp := range mps {
			if viewed(mp) {
				_ = os.MkdirAll(filepath.Join(mp, cgroup.SandboxPath(id)), 0o755)
			}
		}
	}
	cgroup.WarmAttach()
}

// bindReadOnly binds src on dst, read-only, nosuid, nodev and noexec (a
// bind takes its flags only from a remount).
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|viewFlags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// UnmountCgroupView detaches a view MountCgroupView made at dir (the
// tmpfs and the binds on it together) and removes dir; a dir that is not
// there is fine.
func UnmountCgroupView(dir string) error { return unmountPrepared(dir, "cgroup view") }

// pureV2 reports whether mps, the host's cgroup mountpoints, are a pure
// cgroup v2 host's: the unified hierarchy alone, at cgroup.Root.
func pureV2(mps []string) bool { return len(mps) == 1 && mps[0] == cgroup.Root }
