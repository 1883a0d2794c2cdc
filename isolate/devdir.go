package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A sandbox's /dev is a small tmpfs with Docker's device nodes, its
// symlinks and the mountpoints of devpts, shm and mqueue. Made by
// libcontainer's init, each node and symlink costs it about 40 syscalls of
// path checks. MountDev makes the tmpfs on the host side instead, in the
// mount namespace the container is started from, and the sandbox gets it
// as one bind (libcontainer then makes no device nodes: a bind at /dev is
// its sign that /dev is prepared). The device cgroup still decides which
// devices can be opened.

// devNodes are the device nodes of every sandbox's /dev (libcontainer's
// default devices), all 0666.
var devNodes = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// devLinks are its symlinks, as libcontainer makes them.
var devLinks = [][2]string{
	{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
	{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
}

// devOptions are the tmpfs options of /dev, Docker's.
const devOptions = "mode=755,size=65536k"

// MountDev makes dir (created if missing; it must be empty) a sandbox's
// /dev for Spec.Dev: a tmpfs mounted nosuid with the nodes null, zero,
// full, random, urandom and tty, the symlinks ptmx, fd, stdin, stdout,
// stderr (and core where /proc/kcore exists), and empty pts, shm and
// mqueue directories. owner, unless -1, is the host id of the sandbox's
// root in a user namespace: the tmpfs and everything in it are its. It
// mounts in the calling thread's mount namespace, which must be the one
// the container is started from; UnmountDev undoes it.
func MountDev(dir string, owner int) (err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox /dev: %w", err)
	}
	opts := devOptions
	if owner >= 0 {
		opts += ",uid=" + strconv.Itoa(owner) + ",gid=" + strconv.Itoa(owner)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, opts); err != nil {
		return fmt.Errorf("sandbox /dev: mount a tmpfs on %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	}()
	old := unix.Umask(0)
	defer unix.Umask(old)
	for _, n := range devNodes {
		p := filepath.Join(dir, n.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(n.major, n.minor))); err != nil {
			return fmt.Errorf("sandbox /dev: %s: %w", n.name, err)
		}
		if err := own(p, owner); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		p := filepath.Join(dir, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("sandbox /dev: %w", err)
		}
		if err := own(p, owner); err != nil {
			return err
		}
	}
	links := devLinks
	if _, err := os.Stat("/proc/kcore"); err == nil {
		links = append(links[:len(links):len(links)], [2]string{"/proc/kcore", "core"})
	}
	for _, l := range links {
		p := filepath.Join(dir, l[1])
		if err := os.Symlink(l[0], p); err != nil {
			return fmt.Errorf("sandbox /dev: %w", err)
		}
		if err := own(p, owner); err != nil {
			return err
		}
	}
	return nil
}

// own gives p to the user namespace's root (owner), unless owner is -1.
func own(p string, owner int) error {
	if owner < 0 {
		return nil
	}
	if err := os.Lchown(p, owner, owner); err != nil {
		return fmt.Errorf("sandbox /dev: give %s to the sandbox's root: %w", p, err)
	}
	return nil
}

// UnmountDev detaches a /dev MountDev made at dir (with anything mounted
// below it) and removes dir; a dir that is not there is fine.
func UnmountDev(dir string) error { return unmountPrepared(dir, "sandbox /dev") }

// unmountPrepared detaches the mount at dir, and what is below it, and
// removes dir: the undoing of MountDev and MountCgroupView. A dir that is
// not there, or not a mountpoint, is fine.
func unmountPrepared(dir, what string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the %s %s: %w", what, dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the %s %s: %w", what, dir, err)
	}
	return nil
}
