// Package reaper is the minimal init of one-shot sandboxes: PID 1 inside the
// sandbox that starts the command, forwards signals to it, reaps every
// orphan, and reports how the command ended to the host over a pipe.
package reaper

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/oomscore"
	"github.com/sbxrun/sbx/internal/procguard"
	"github.com/sbxrun/sbx/internal/sigreset"
	"github.com/sbxrun/sbx/seccomp/bpfload"
)

// Status is how the command ended, written as one JSON line to the status fd.
type Status struct {
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal,omitempty"`
	ExecError string `json:"exec_error,omitempty"` // the command could not be started
}

// Exit codes for commands that could not be started, as shells use them.
const (
	ExitCannotExec = 126
	ExitNotFound   = 127
)

// Main is the init's command line: [--status-fd N] [--lifeline-fd N]
// [--seccomp-fd N] [--tty] [--] CMD [ARG...]. It loads the seccomp filter,
// runs the command and returns the exit code for PID 1. Both the sbx binary
// ("sbx reaper ...") and the small sbx-init binary use it.
func Main(args []string) int {
	fs := flag.NewFlagSet("reaper", flag.ContinueOnError)
	statusFD := fs.Int("status-fd", -1, "write the command's status as JSON to this fd")
	lifelineFD := fs.Int("lifeline-fd", -1, "kill the sandbox when this pipe closes")
	seccompFD := fs.Int("seccomp-fd", -1, "load the seccomp filter read from this fd before starting the command")
	tty := fs.Bool("tty", false, "give stdin's terminal to the command")
	if err := fs.Parse(args); err != nil {
		return 125
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "sbx init: no command given")
		return 125
	}
	// Before anything runs: the command must neither attach to this
	// process nor inherit the host's pipes (it could forge the status).
	if err := procguard.Apply(); err != nil {
		fmt.Fprintln(os.Stderr, "sbx init:", err)
		return 125
	}
	if *seccompFD >= 0 {
		if err := bpfload.LoadFromFD(*seccompFD); err != nil {
			fmt.Fprintln(os.Stderr, "sbx init:", err)
			return ExitCannotExec
		}
	}
	return Run(Options{Args: fs.Args(), StatusFD: *statusFD, Tty: *tty, LifelineFD: *lifelineFD})
}

// forwarded are the signals PID 1 passes on to the command's process group.
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGCONT, syscall.SIGTSTP,
}

// Options configure Run.
type Options struct {
	Args     []string // the command and its arguments
	StatusFD int      // where to write the Status; <0 for nowhere
	Tty      bool     // stdin is the sandbox's terminal: give it to the command
	// LifelineFD is the read end of a pipe whose write end only the host's
	// sbx process holds: when it closes (sbx died, even by SIGKILL), every
	// process of the sandbox is killed. <0 for none.
	LifelineFD int
}

// Run starts the command, supervises it, and returns the exit code PID 1
// should exit with. It never returns before the command has ended.
func Run(o Options) int {
	sigreset.IgnoredToDefault() // the command starts with no signal ignored
	// One P is plenty for an init that only waits, and keeps its threads,
	// which count against the sandbox's pids limit, few.
	runtime.GOMAXPROCS(1)
	if o.LifelineFD >= 0 {
		go watchLifeline(o.LifelineFD)
	}
	signals := make(chan os.Signal, 64)
	signal.Notify(signals, forwarded...)
	signal.Notify(signals, syscall.SIGCHLD)
	defer signal.Stop(signals)

	st := run(o, signals)
	if o.StatusFD >= 0 {
		f := os.NewFile(uintptr(o.StatusFD), "status")
		_ = json.NewEncoder(f).Encode(st)
		f.Close()
	}
	if st.Signal != 0 {
		return 128 + st.Signal
	}
	return st.ExitCode
}

func run(o Options, signals chan os.Signal) Status {
	if len(o.Args) == 0 {
		return Status{ExitCode: ExitCannotExec, ExecError: "no command given"}
	}
	path, err := exec.LookPath(o.Args[0])
	if err != nil {
		return execFailure(o.Args[0], err)
	}
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if o.Tty {
		attr.Sys = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	}
	pid, err := syscall.ForkExec(path, o.Args, attr)
	if err != nil {
		return execFailure(o.Args[0], err)
	}
	oomscore.Raise(pid) // under the memory limit, the command goes first
	for sig := range signals {
		s, ok := sig.(syscall.Signal)
		if !ok {
			continue
		}
		if s != syscall.SIGCHLD {
			forward(pid, s)
			continue
		}
		if st, done := reap(pid); done {
			return st
		}
	}
	return Status{ExitCode: ExitCannotExec, ExecError: "signal channel closed"}
}

// watchLifeline kills the whole sandbox when the host side goes away.
func watchLifeline(fd int) {
	f := os.NewFile(uintptr(fd), "lifeline")
	buf := make([]byte, 1)
	for {
		if _, err := f.Read(buf); err != nil {
			_ = unix.Kill(-1, unix.SIGKILL) // every process but PID 1
			os.Exit(128 + int(unix.SIGKILL))
		}
	}
}

// forward passes a signal to the command's process group, or to the command
// alone when the group is gone.
func forward(pid int, s syscall.Signal) {
	if err := unix.Kill(-pid, s); err != nil {
		_ = unix.Kill(pid, s)
	}
}

// reap collects every exited child; done is true once the command itself
// has exited, with its status.
func reap(pid int) (st Status, done bool) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || got <= 0 {
			return st, done
		}
		if got != pid {
			continue
		}
		done = true
		switch {
		case ws.Exited():
			st = Status{ExitCode: ws.ExitStatus()}
		case ws.Signaled():
			st = Status{ExitCode: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
		}
	}
}

func execFailure(name string, err error) Status {
	code := ExitCannotExec
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		code = ExitNotFound
	}
	msg := err.Error()
	var ee *exec.Error
	if !errors.As(err, &ee) {
		msg = name + ": " + msg
	}
	return Status{ExitCode: code, ExecError: msg}
}
