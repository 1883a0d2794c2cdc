package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// InNamespace runs fn on an OS thread that has joined the network namespace
// open as nsFD, then switches the thread back. Sockets fn creates stay in
// that namespace. If the thread cannot switch back it is thrown away.
func InNamespace(nsFD int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("join network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: Go ends it when this goroutine exits.
			errc <- errors.Join(ferr, fmt.Errorf("return to original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// InNamespacePath is InNamespace for a namespace given by path.
func InNamespacePath(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer f.Close()
	return InNamespace(int(f.Fd()), fn)
}

// CreateNamespace makes a new network namespace and keeps it alive by
// bind-mounting it on path (like `ip netns add`), which must not exist yet.
// Loopback is brought up when up is set.
func CreateNamespace(path string, up func() error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create network namespace file %s: %w", path, err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		ferr := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
		if ferr != nil {
			ferr = fmt.Errorf("bind-mount new network namespace on %s: %w", path, ferr)
		} else if up != nil {
			ferr = up()
		}
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("return to original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		_ = RemoveNamespace(path)
		return err
	}
	return nil
}

// RemoveNamespace unmounts and removes a namespace made by CreateNamespace.
// A missing path is not an error.
func RemoveNamespace(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace file %s: %w", path, err)
	}
	return nil
}

// writeSysctl writes a /proc/sys value; call it inside InNamespace for
// per-namespace (net.*) keys.
func writeSysctl(key, value string) error {
	p := "/proc/sys/" + key
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
