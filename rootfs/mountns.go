package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Every mount in the host's mount namespace is copied into each new
// sandbox's mount namespace when its container starts (and unmounted again
// with its old root), so each sandbox whose writable layer and overlay
// root are mounted on the host makes every later start slower. Namespaces
// lets those mounts live in a mount namespace of their own per sandbox
// instead: made by a locked OS thread, a private copy of the host's, in
// which the sandbox's mounts are made and from which its container is
// started (a child process inherits its creating thread's mount
// namespace). Each such namespace is kept by a bind of its nsfs file on
// the host: one mount per sandbox instead of two, and one that the kernel
// never copies into a new mount namespace (copies skip mount namespace
// files), so container starts do not grow with the number of sandboxes.

// Namespaces keeps the per-sandbox mount namespaces of one directory (a
// run root's): each at dir/NAME, an empty file with the namespace's nsfs
// file bound on it.
//
// Its methods must be called from goroutines in the host's mount
// namespace (any goroutine that is not locked into another one).
type Namespaces struct{ dir string }

// NewNamespaces returns the per-sandbox mount namespaces kept under dir.
func NewNamespaces(dir string) *Namespaces { return &Namespaces{dir: dir} }

func (n *Namespaces) pinPath(name string) string { return filepath.Join(n.dir, name) }

// Create runs fn on a locked OS thread in a new mount namespace, a private
// copy of the host's (mounts made in it are never seen by the host, nor
// host mounts made later by it). Processes fn starts from that thread
// start in it; goroutines fn starts do not run in it, so fn resolves its
// paths itself. If fn succeeds the namespace is kept under name until
// Remove; if fn or the pin fails, the namespace and every mount fn made in
// it go with the thread (and with the processes fn started, which hold
// copies).
func (n *Namespaces) Create(name string, fn func() error) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return fmt.Errorf("create the mount namespaces directory: %w", err)
	}
	pin := n.pinPath(name)
	f, err := os.OpenFile(pin, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pin the mount namespace of %s: %w", name, err)
	}
	f.Close()
	made := make(chan string)
	pinned := make(chan error, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- onLockedThread(func() error {
			defer close(made)
			if err := newPrivateNS(); err != nil {
				return err
			}
			if err := fn(); err != nil {
				return err
			}
			made <- threadNS()
			return <-pinned // the namespace must live until it is pinned
		})
	}()
	if nsPath, ok := <-made; ok {
		// From the caller's goroutine, in the host's namespace. The kernel
		// allows the bind because the pinned namespace is newer than the
		// host's (no loop of namespaces).
		err = unix.Mount(nsPath, pin, "", unix.MS_BIND, "")
		if err != nil {
			err = fmt.Errorf("pin the mount namespace of %s: %w", name, err)
		}
		pinned <- err
	}
	if ferr := <-errc; err == nil {
		err = ferr
	}
	if err != nil {
		if rerr := n.Remove(name); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// Enter runs fn on a locked OS thread in the mount namespace kept under
// name (as Create's fn runs: its goroutines run elsewhere).
func (n *Namespaces) Enter(name string, fn func() error) error {
	if err := checkName(name); err != nil {
		return err
	}
	return onLockedThread(func() error {
		if err := join(n.pinPath(name)); err != nil {
			return fmt.Errorf("enter the mount namespace of %s: %w", name, err)
		}
		return fn()
	})
}

// Has reports whether a namespace is kept (or being made) under name.
func (n *Namespaces) Has(name string) bool {
	if checkName(name) != nil {
		return false
	}
	_, err := os.Lstat(n.pinPath(name))
	return err == nil
}

// Names lists the names of the namespaces kept (or being made).
func (n *Namespaces) Names() ([]string, error) {
	entries, err := os.ReadDir(n.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the mount namespaces: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// Remove lets go of the namespace kept under name: its mounts go once no
// process is left in it or in a namespace copied from it. Removing a name
// that is not kept is not an error.
func (n *Namespaces) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	pin := n.pinPath(name)
	if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpin the mount namespace of %s: %w", name, err)
	}
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the pin of the mount namespace of %s: %w", name, err)
	}
	return nil
}

// newPrivateNS moves the calling (locked) thread into a new mount
// namespace, a copy of its own made private: mounts made there must not
// propagate to the host's peers (on hosts whose / is shared), nor the
// host's later mounts there.
func newPrivateNS() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the new mount namespace private: %w", err)
	}
	return nil
}

// threadNS is the nsfs path of the calling thread's mount namespace.
func threadNS() string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/task/" + strconv.Itoa(unix.Gettid()) + "/ns/mnt"
}

// join moves the calling (locked) thread into the mount namespace whose
// nsfs file is at path. The thread stops sharing its file system
// attributes with the process first, as setns requires.
func join(path string) error {
	fd, err := openNS(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare file system attributes: %w", err)
	}
	// setns moves the working directory to the namespace's root; the
	// caller's relative paths (a --seccomp profile given as prof.json, read
	// again when a stopped sandbox starts) must keep meaning what they did,
	// so the thread goes back to the same path, which the namespace (a copy
	// of the host's) has unless it was mounted on the host since. A
	// descriptor of the host's directory would not do: getcwd fails where
	// the directory is not below the namespace's root.
	cwd, cwdErr := os.Getwd()
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join mount namespace %s: %w", path, err)
	}
	if cwdErr == nil {
		_ = unix.Chdir(cwd) // else "/", where setns left it
	}
	return nil
}

// openNS opens the namespace file at path (a kept namespace's pin),
// refusing anything else.
func openNS(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is not a namespace (being made, or its sandbox crashed: sbx gc)", path)
	}
	return fd, nil
}

// onLockedThread runs fn on a goroutine locked to its OS thread and never
// unlocked: fn may change the thread's namespaces, and Go ends a thread
// whose locked goroutine returns, so no other goroutine ever runs there.
// Go cannot end the process's main thread (a locked goroutine ending there
// leaves it in fn's namespaces for good, and /proc/self shows that
// thread's view), so fn never runs there: a goroutine that lands on it
// holds it while another one, which then cannot, takes over.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	var start func()
	start = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			done := make(chan struct{})
			go func() { start(); close(done) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		// A panic or runtime.Goexit in fn ends this thread, not the
		// process (a server serving other requests), and is fn's error.
		sent := false
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("panic on a mount namespace thread: %v", r)
			} else if !sent {
				errc <- errors.New("a mount namespace thread exited early (runtime.Goexit)")
			}
		}()
		err := fn()
		sent = true
		errc <- err
	}
	go start()
	return <-errc
}

// checkName refuses names that are not one path element.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("mount namespace name %q: not a plain name", name)
	}
	return nil
}
