// Package proc starts, runs and reaps the executor's processes. Run is the
// one way a command runs (exec, attach, the main command; Launch and Wait
// for detached exec): it starts it as its user, with its environment,
// working directory and descriptors, in its own process group or session,
// streams its output, kills its group at a timeout or when the caller goes,
// drains the output and measures what it used. One goroutine owns every
// wait: it reaps each child that exits, hands the status to the
// Process that started it, and silently reaps orphans re-parented to the
// executor (as PID 1 of a sandbox, or as a child subreaper otherwise). No
// other code may call wait on children, so nothing races with it.
package proc

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/oomscore"
)

// Supervisor starts processes and reaps all children of this process.
type Supervisor struct {
	mu      sync.Mutex
	procs   map[int]*Process
	orphans uint64
	sigc    chan os.Signal
	stop    chan struct{}
	stopped sync.WaitGroup
	oomAdj  []byte // oom_score_adj of started processes
	pidfds  bool   // the kernel gives a pidfd of each child (CLONE_PIDFD)
}

// Process is a child started by a Supervisor. Its pid is also its process
// group id (and session id when started with Setsid).
type Process struct {
	Pid    int
	done   chan struct{}
	status unix.WaitStatus
	rusage unix.Rusage
}

// NewSupervisor makes this process reap its descendants: as PID 1 it does
// so anyway; otherwise it becomes a child subreaper so that orphans of its
// commands are re-parented to it rather than to the host's init.
func NewSupervisor() (*Supervisor, error) {
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("become child subreaper: %w", err)
		}
	}
	s := &Supervisor{
		procs:  make(map[int]*Process),
		sigc:   make(chan os.Signal, 1),
		stop:   make(chan struct{}),
		oomAdj: []byte(strconv.Itoa(oomscore.Value())),
		pidfds: pidfdWorks(),
	}
	signal.Notify(s.sigc, unix.SIGCHLD)
	s.stopped.Add(1)
	go s.loop()
	return s, nil
}

// pidfdWorks reports whether this kernel has pidfds that can be polled
// (Linux 5.3).
func pidfdWorks() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// Close stops reaping. Children started afterwards are never waited for.
func (s *Supervisor) Close() {
	signal.Stop(s.sigc)
	close(s.stop)
	s.stopped.Wait()
}

func (s *Supervisor) loop() {
	defer s.stopped.Done()
	// SIGCHLD can coalesce; the ticker is a safety net, never the main path.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.reapAll()
		select {
		case <-s.sigc:
		case <-tick.C:
		case <-s.stop:
			return
		}
	}
}

// Reap collects every child that has exited now, without waiting for
// SIGCHLD to reach the reaping goroutine. A caller that knows a child is
// about to be a zombie (its pipes just closed) saves that hop.
func (s *Supervisor) Reap() { s.reapAll() }

// reapAll collects every child that has exited. It holds mu across wait4 so
// that a child started by Start is always registered before it can be reaped.
func (s *Supervisor) reapAll() {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		s.mu.Lock()
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, &ru)
		if pid > 0 {
			if p := s.procs[pid]; p != nil {
				delete(s.procs, pid)
				p.status, p.rusage = ws, ru
				close(p.done)
			} else {
				s.orphans++
			}
		}
		s.mu.Unlock()
		if pid <= 0 {
			if err != nil && err != unix.ECHILD && err != unix.EINTR {
				slog.Warn("executor: wait4 failed", "err", err)
			}
			if err == unix.EINTR {
				continue
			}
			return
		}
	}
}

// Start starts argv[0] (an absolute path) with attr and registers it for
// reaping. The caller waits with Done.
//
// The process is reaped as soon as it exits: a pidfd of it, on Go's
// poller, wakes a goroutine that reaps it, without waiting for SIGCHLD to
// travel through the runtime's signal thread and os/signal (two thread
// hand-offs more on the path of every command). SIGCHLD still reaps what
// the pidfd does not (orphans, and kernels without CLONE_PIDFD).
func (s *Supervisor) Start(path string, argv []string, attr *os.ProcAttr) (*Process, error) {
	sys := &syscall.SysProcAttr{}
	if attr.Sys != nil {
		c := *attr.Sys
		sys = &c
	}
	pidfd := -1
	if s.pidfds {
		sys.PidFD = &pidfd
	}
	env := attr.Env
	if env == nil {
		env = syscall.Environ()
	}
	files := make([]uintptr, len(attr.Files))
	for i, f := range attr.Files {
		files[i] = ^uintptr(0) // closed in the child
		if f != nil {
			files[i] = f.Fd()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, _, err := syscall.StartProcess(path, argv, &syscall.ProcAttr{Dir: attr.Dir, Env: env, Files: files, Sys: sys})
	runtime.KeepAlive(attr) // its files stay open until the child has them
	if err != nil {
		return nil, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	proc := &Process{Pid: pid, done: make(chan struct{})}
	s.procs[pid] = proc
	s.raiseOOMScore(pid) // under a small memory limit, the command goes first
	if pidfd >= 0 {
		go s.reapOnExit(proc, pidfd)
	}
	return proc, nil
}

// reapOnExit waits on the poller until the process of pidfd has exited,
// then reaps it (unless SIGCHLD's reaping came first), and closes pidfd.
func (s *Supervisor) reapOnExit(p *Process, pidfd int) {
	f := pollable(pidfd)
	if f == nil {
		unix.Close(pidfd)
		return // SIGCHLD reaps it
	}
	rc, err := f.SyscallConn()
	if err == nil {
		_ = rc.Read(func(fd uintptr) bool {
			if p.Exited() {
				return true
			}
			// A pidfd reads as ready once its process has exited.
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			return err != nil || n > 0
		})
	}
	// Closed before the reaping that makes Done return: a caller that
	// waited for Done has no descriptor of the process left open.
	f.Close()
	if err == nil && !p.Exited() {
		s.reapAll()
	}
}

// pollable returns fd as a non-blocking file on Go's poller, or nil.
func pollable(fd int) *os.File {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}

// raiseOOMScore makes pid a likelier OOM victim than the executor, as
// oomscore.Raise does, with the value computed once and plain system
// calls (this is on the path of every command). Failures are ignored.
func (s *Supervisor) raiseOOMScore(pid int) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _ = unix.Write(fd, s.oomAdj)
	unix.Close(fd)
}

// Running returns the pids of the processes started by Start that have not
// exited yet.
func (s *Supervisor) Running() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := make([]int, 0, len(s.procs))
	for pid := range s.procs {
		pids = append(pids, pid)
	}
	return pids
}

// Orphans is the number of re-parented processes reaped so far.
func (s *Supervisor) Orphans() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orphans
}

// Done is closed when the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has been reaped.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Status is the wait status; valid once Done is closed.
func (p *Process) Status() unix.WaitStatus { return p.status }

// ExitCode returns the exit code as a shell reports it (128+n for a signal)
// and the name of the signal that ended the process, if any.
func (p *Process) ExitCode() (int, string) {
	ws := p.status
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

// Usage is what the process and the children it waited for used: user and
// system CPU time, and the largest resident set among them in bytes
// (wait4's rusage); valid once Done is closed. Descendants it left behind
// are not counted.
func (p *Process) Usage() (user, sys time.Duration, maxRSSBytes uint64) {
	ru := &p.rusage
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), uint64(max(ru.Maxrss, 0)) << 10
}

// SignalGroup sends sig to the process group the process leads. It is a
// no-op error (ESRCH) once the whole group is gone.
func (p *Process) SignalGroup(sig unix.Signal) error {
	return unix.Kill(-p.Pid, sig)
}

// Signal sends sig to the process itself while it has not been reaped.
func (p *Process) Signal(sig unix.Signal) error {
	if p.Exited() {
		return unix.ESRCH
	}
	return unix.Kill(p.Pid, sig)
}
