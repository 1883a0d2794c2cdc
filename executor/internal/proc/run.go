package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// DrainGrace is how long a command's output is still read after it
// exited, for background children that keep its pipes open.
const DrainGrace = 250 * time.Millisecond

// Group says where a started command stands among process groups and
// sessions. Its pid is the id of its group (and of its session) either way,
// so that a kill reaches every process it started.
type Group int

// Groups of Command.Group.
const (
	// OwnGroup is a process group of its own in the executor's session.
	OwnGroup Group = iota
	// OwnSession is a session of its own, without a terminal.
	OwnSession
	// TerminalSession is a session of its own whose controlling terminal is
	// the command's standard input.
	TerminalSession
)

// Command says how to start a process.
type Command struct {
	// Argv is the command and its arguments; a name without a slash is
	// looked up in the PATH of Env (relative entries against Dir).
	Argv []string
	// Dir is the working directory, Env the whole environment ("K=V").
	Dir string
	Env []string
	// Cred is the user to run as; nil keeps the executor's own.
	Cred *syscall.Credential
	// Stdio are the command's descriptors 0, 1 and 2 (nil: closed).
	Stdio [3]*os.File
	// Group is its process group or session.
	Group Group
	// Close are the caller's copies of descriptors the command holds now
	// (the write ends of its output pipes, its terminal): closed once the
	// command started or failed to.
	Close []*os.File
}

// StartError is a command that could not start, with the exit code a
// shell reports for it: 127 when it is not found, 126 when it cannot be
// executed.
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }

func (e *StartError) Unwrap() error { return e.Err }

// Launch starts c and registers it for reaping; it does not wait. An error
// is a *StartError.
func (s *Supervisor) Launch(c Command) (*Process, error) {
	defer closeFiles(c.Close)
	path, err := LookPath(c.Argv[0], c.Env, c.Dir)
	if err != nil {
		return nil, &StartError{Code: 127, Err: err}
	}
	sys := &syscall.SysProcAttr{Credential: c.Cred}
	switch c.Group {
	case OwnGroup:
		sys.Setpgid = true
	case OwnSession:
		sys.Setsid = true
	case TerminalSession:
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	}
	p, err := s.Start(path, c.Argv, &os.ProcAttr{Dir: c.Dir, Env: c.Env, Files: c.Stdio[:], Sys: sys})
	if err != nil {
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return nil, &StartError{Code: code, Err: err}
	}
	return p, nil
}

// Limits end a command early: when Timeout passes (0: never) or Cancel is
// closed (the caller went away), its whole process group gets StopSignal
// and, StopGrace later (or at once without a StopSignal), SIGKILL.
type Limits struct {
	Timeout    time.Duration
	Cancel     <-chan struct{}
	StopSignal unix.Signal
	StopGrace  time.Duration
}

// Result is how a command ended and what it used.
type Result struct {
	// ExitCode is as a shell reports it: 128+n for signal n, and
	// sbx.ExitTimeout for a command killed at its timeout.
	ExitCode int
	// Signal names the signal that ended it ("SIGKILL"), if any.
	Signal   string
	TimedOut bool
	// Duration is from the start to the end of the run, its output read.
	Duration time.Duration
	// User and Sys are its CPU times; MaxRSSBytes the largest resident
	// set of it and the children it waited for.
	User, Sys   time.Duration
	MaxRSSBytes uint64
}

// Run starts c, hands what it writes on out.Files to out.Sink, and waits
// until it exited (killing its group at lim's timeout, when lim.Cancel
// closes or when the sink fails) and its output was read. started, when
// not nil, is called once it runs. Run closes out.Files. An error is a
// *StartError.
func (s *Supervisor) Run(c Command, out Output, lim Limits, started func(*Process)) (Result, error) {
	begin := time.Now()
	p, err := s.Launch(c)
	if err != nil {
		closeFiles(out.Files)
		return Result{}, err
	}
	if started != nil {
		started(p)
	}
	res := s.Wait(p, out.Read(), lim)
	res.Duration = time.Since(begin)
	return res, nil
}

// Wait waits until p exited and out (nil: none) was read to its end, or
// up to DrainGrace after p exited when background children hold the
// output open. At lim's timeout, when lim.Cancel closes or when out's sink
// fails, it stops p's process group (lim.StopSignal, SIGKILL after
// lim.StopGrace). The result's Duration is left to the
// caller.
func (s *Supervisor) Wait(p *Process, out *Reader, lim Limits) Result {
	var timeout <-chan time.Time
	if lim.Timeout > 0 {
		t := time.NewTimer(lim.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var drained, failed <-chan struct{}
	if out != nil {
		drained, failed = out.drained, out.failed
	}
	timedOut := false
	kill := func() {
		if lim.StopSignal != 0 && lim.StopSignal != unix.SIGKILL {
			_ = p.SignalGroup(lim.StopSignal)
			grace := time.NewTimer(lim.StopGrace)
			select {
			case <-p.Done():
			case <-grace.C:
			}
			grace.Stop()
		}
		_ = p.SignalGroup(unix.SIGKILL)
		<-p.Done()
	}
	// wait waits for p to exit, ending it early at the timeout, at
	// cancel or when the sink fails, or for drained; it reports whether
	// drained came first.
	wait := func(drained <-chan struct{}) bool {
		select {
		case <-drained:
			return true
		case <-p.Done():
		case <-timeout:
			timedOut = true
			kill()
		case <-lim.Cancel:
			kill()
		case <-failed:
			kill()
		}
		return false
	}
	if wait(drained) {
		// The pipes close as the command exits: reap it at once rather
		// than through the SIGCHLD hop (SIGCHLD still reaps it should it
		// not be a zombie yet).
		s.Reap()
		wait(nil)
	}
	if timedOut {
		// Members of the group that outlived the leader die too.
		_ = p.SignalGroup(unix.SIGKILL)
	}
	if out != nil {
		out.finish(DrainGrace)
	}
	code, sig := p.ExitCode()
	if timedOut {
		code = sbx.ExitTimeout
	}
	user, sys, maxRSS := p.Usage()
	return Result{ExitCode: code, Signal: sig, TimedOut: timedOut, User: user, Sys: sys, MaxRSSBytes: maxRSS}
}

// OutputPipe returns a pipe for a command's output: the read end on Go's
// poller, the write end (the command's, closed by Launch once it started)
// a plain blocking descriptor, as the command expects it. os.Pipe would
// put both ends on the poller and take the write end off it again at the
// start: ten system calls more for each command.
func OutputPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("make an output pipe: %w", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, fmt.Errorf("make an output pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
