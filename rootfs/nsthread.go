package rootfs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A visit of another mount namespace (Namespaces.Visit, VisitOnThread) runs
// on one OS thread kept for visits rather than on a thread made for it and
// ended with it (onLockedThread): making and ending a thread, and the Go
// runtime's hand-offs around a locked goroutine that exits, cost about
// half a millisecond on a busy two-CPU host, on the path of a pool
// member's claim. The thread keeps descriptors of the host's mount and
// UTS namespaces, opened when it was made (before it ever left them), and
// goes back into both after each visit. Its other namespaces that a visit
// could change (network, IPC, cgroup, the PID and time namespaces of its
// children), which no visit may leave, are checked after each visit
// against the host's, noted when it was made, and so are its capability
// sets (effective, permitted, inheritable: a visit may drop one while it
// needs less, but must give it back). A thread that cannot go back, that a
// visit left in another of those namespaces or with other capabilities,
// or whose visit panicked, ends (it stays locked), and the next visit
// makes a new one.
// While the kept thread is busy, a visit runs on a thread of its own.

// visitor is the kept thread: it takes visits from jobs.
type visitor struct {
	jobs chan visit
	busy atomic.Bool // a visit is sent or running
}

type visit struct {
	fn   func() error
	done chan error
}

var visitors struct {
	sync.Mutex
	v *visitor
}

// VisitOnThread runs fn on a locked OS thread in the host's mount and UTS
// namespaces, which fn may leave (setns into a sandbox's mount and UTS
// namespaces: nothing else, no user or network namespace; a visit that
// leaves another fails and its thread ends), after joining
// the mount namespace whose nsfs file is at nsPath if it is not empty.
// fn must not start processes (their parent is a kept thread) nor rely
// on goroutines it starts being in those namespaces, and must resolve
// absolute paths only (the thread's working directory is its namespace's
// root).
func VisitOnThread(nsPath string, fn func() error) error {
	return StartVisit(nsPath, fn)()
}

// StartVisit starts VisitOnThread(nsPath, fn) and returns at once: wait
// waits for it and returns its error. The caller works on meanwhile,
// without a goroutine of its own to wake.
func StartVisit(nsPath string, fn func() error) (wait func() error) {
	job := func() error {
		if nsPath != "" {
			if err := joinKeptThread(nsPath); err != nil {
				return fmt.Errorf("enter the mount namespace %s: %w", nsPath, err)
			}
		}
		return fn()
	}
	done := make(chan error, 1)
	if v := keptVisitor(); v != nil && v.busy.CompareAndSwap(false, true) {
		v.jobs <- visit{fn: job, done: done}
	} else { // none, or busy with another visit
		go func() { done <- onLockedThread(job) }()
	}
	return func() error { return <-done }
}

// StartVisit starts fn in the mount namespace kept under name as Enter
// runs it, on the kept thread (VisitOnThread says what fn may do there),
// and returns at once, as the function StartVisit does.
func (n *Namespaces) StartVisit(name string, fn func() error) (wait func() error) {
	if err := checkName(name); err != nil {
		return func() error { return err }
	}
	return StartVisit(n.pinPath(name), fn)
}

// keptVisitor returns the kept thread, made if there is none (nil if it
// cannot be made).
func keptVisitor() *visitor {
	visitors.Lock()
	defer visitors.Unlock()
	if visitors.v != nil {
		return visitors.v
	}
	v := &visitor{jobs: make(chan visit)}
	ready := make(chan bool)
	go v.run(ready)
	if !<-ready {
		return nil
	}
	visitors.v = v
	return v
}

// run is the kept thread: it locks itself (never unlocking), opens the
// host's namespaces and serves visits until one leaves it unable to go
// back. It never runs on the process's main thread (onLockedThread says
// why): landed there, it holds that thread until another goroutine has
// locked a thread of its own to serve from.
func (v *visitor) run(ready chan<- bool) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		locked := make(chan struct{})
		go v.serve(ready, locked)
		<-locked
		runtime.UnlockOSThread()
		return
	}
	v.serve(ready, nil)
}

func (v *visitor) serve(ready chan<- bool, locked chan<- struct{}) {
	runtime.LockOSThread()
	if locked != nil {
		close(locked)
	}
	mnt, merr := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	uts, uerr := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	others, oerr := noteOtherNamespaces()
	caps, cerr := threadCaps()
	if merr != nil || uerr != nil || oerr != nil || cerr != nil || unix.Unshare(unix.CLONE_FS) != nil {
		closeFDs(mnt, uts, others.dir)
		ready <- false
		return // the thread ends with the goroutine (still locked)
	}
	ready <- true
	for j := range v.jobs {
		err, ok := runVisit(j.fn)
		back := errors.Join(unix.Setns(mnt, unix.CLONE_NEWNS), unix.Setns(uts, unix.CLONE_NEWUTS), others.check(), caps.check())
		if !ok || back != nil {
			// Out of service before the visit's caller goes on.
			visitors.Lock()
			if visitors.v == v {
				visitors.v = nil
			}
			visitors.Unlock()
			closeFDs(mnt, uts, others.dir)
			j.done <- errors.Join(err, back)
			return // busy for good: nobody sends to it again
		}
		v.busy.Store(false)
		j.done <- err
	}
}

// otherNamespaces are the namespaces of the kept thread that no visit may
// leave, as they were when it was made: dir is its /proc/thread-self/ns
// (the thread is kept, so the directory stays its own), ids what each
// namespace's link there reads ("net:[4026531840]"), which names the
// namespace as its inode does, at a third of the cost of a stat.
type otherNamespaces struct {
	dir int
	ids []namespaceID
}

type namespaceID struct{ name, link string }

// otherNamespaceNames are the kept thread's namespaces besides its mount
// and UTS namespaces that a visit could change: for PID and time, those
// its children would be in, which setns and unshare change (the thread's
// own never change). Its user namespace is not among them: the kernel
// lets no thread of a multithreaded process join or make another.
var otherNamespaceNames = []string{"net", "ipc", "cgroup", "pid_for_children", "time_for_children"}

// noteOtherNamespaces notes the calling thread's otherNamespaceNames (one
// the kernel lacks, such as time before 5.6, is not noted).
func noteOtherNamespaces() (otherNamespaces, error) {
	dir, err := unix.Open("/proc/thread-self/ns", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return otherNamespaces{dir: -1}, err
	}
	o := otherNamespaces{dir: dir}
	var buf [64]byte
	for _, name := range otherNamespaceNames {
		n, err := unix.Readlinkat(dir, name, buf[:])
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			unix.Close(dir)
			return otherNamespaces{dir: -1}, fmt.Errorf("namespace %s of a namespace thread: %w", name, err)
		}
		o.ids = append(o.ids, namespaceID{name, string(buf[:n])})
	}
	return o, nil
}

// check fails unless the calling thread (the one that noted them) is
// still in each of its noted namespaces.
func (o otherNamespaces) check() error {
	var buf [64]byte
	for _, id := range o.ids {
		n, err := unix.Readlinkat(o.dir, id.name, buf[:])
		if err != nil {
			return fmt.Errorf("namespace %s of a namespace thread: %w", id.name, err)
		}
		if string(buf[:n]) != id.link {
			return fmt.Errorf("a visit left its namespace thread in another %s namespace (visits may change only the mount and UTS namespaces)", id.name)
		}
	}
	return nil
}

// capSets are a thread's capability sets, as capget returns them.
type capSets [2]unix.CapUserData

// threadCaps reads the calling thread's capability sets.
func threadCaps() (capSets, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var c capSets
	if err := unix.Capget(&hdr, &c[0]); err != nil {
		return c, fmt.Errorf("capabilities of a namespace thread: %w", err)
	}
	return c, nil
}

// check fails unless the calling thread (the one that read them) still
// has capability sets c.
func (c capSets) check() error {
	now, err := threadCaps()
	if err != nil {
		return err
	}
	if now != c {
		return errors.New("a visit left its namespace thread with other capabilities (visits must give back what they drop)")
	}
	return nil
}

// runVisit runs fn, turning a panic or runtime.Goexit into an error (ok
// false: the thread must end).
func runVisit(fn func() error) (err error, ok bool) {
	finished := false
	defer func() {
		if r := recover(); r != nil {
			err, ok = fmt.Errorf("panic on a namespace thread: %v", r), false
		} else if !finished {
			err, ok = errors.New("a namespace thread exited early (runtime.Goexit)"), false
		}
	}()
	err = fn()
	finished = true
	return err, true
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// joinKeptThread moves the kept thread (its file system attributes
// unshared already) into the mount namespace whose nsfs file is at path.
func joinKeptThread(path string) error {
	fd, err := openNS(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Setns(fd, unix.CLONE_NEWNS)
}
