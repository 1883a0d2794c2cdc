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
// goes back into both after each visit; a thread that cannot go back, or
// whose visit panicked, ends (it stays locked), and the next visit makes
// a new one. While the kept thread is busy, a visit runs on a thread of
// its own, as before.

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
// namespaces: nothing else, no user or network namespace), after joining
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
	if merr != nil || uerr != nil || unix.Unshare(unix.CLONE_FS) != nil {
		closeFDs(mnt, uts)
		ready <- false
		return // the thread ends with the goroutine (still locked)
	}
	ready <- true
	for j := range v.jobs {
		err, ok := runVisit(j.fn)
		back := errors.Join(unix.Setns(mnt, unix.CLONE_NEWNS), unix.Setns(uts, unix.CLONE_NEWUTS))
		if !ok || back != nil {
			// Out of service before the visit's caller goes on.
			visitors.Lock()
			if visitors.v == v {
				visitors.v = nil
			}
			visitors.Unlock()
			closeFDs(mnt, uts)
			j.done <- errors.Join(err, back)
			return // busy for good: nobody sends to it again
		}
		v.busy.Store(false)
		j.done <- err
	}
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
