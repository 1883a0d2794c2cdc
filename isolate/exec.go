package isolate

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// ErrNotExist is the error of Load for a container that does not exist.
var ErrNotExist = libcontainer.ErrNotExist

// ExecSpec describes a process started in a running container, the way
// `docker exec` starts one: it joins the container's namespaces, cgroups,
// seccomp filter and capability set.
type ExecSpec struct {
	Args           []string
	Env            []string // complete: nothing is added
	Cwd            string
	UID, GID       int
	AdditionalGIDs []int
	// Tty gives the process a terminal of its own of ConsoleSize
	// (columns, rows); Stdin, Stdout and Stderr then do not apply and the
	// terminal's master is Exec.Console.
	Tty            bool
	ConsoleSize    [2]uint16
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exec is a process started with Container.Exec.
type Exec struct {
	p       *libcontainer.Process
	console *os.File
}

// Exec starts a process in the running container. The process is a
// grandchild (libcontainer's setns helper forks it), so the calling
// process becomes a child subreaper to be able to wait for it.
func (c *Container) Exec(s ExecSpec) (*Exec, error) {
	if err := CheckInit(); err != nil {
		return nil, err
	}
	p := &libcontainer.Process{
		Args:             s.Args,
		Env:              s.Env,
		Cwd:              s.Cwd,
		UID:              s.UID,
		GID:              s.GID,
		AdditionalGroups: s.AdditionalGIDs,
		Init:             false,
	}
	var parent *os.File
	if s.Tty {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("console socket: %w", err)
		}
		parent = os.NewFile(uintptr(fds[0]), "console-parent")
		child := os.NewFile(uintptr(fds[1]), "console-child")
		defer parent.Close()
		defer child.Close()
		p.ConsoleSocket = child
		p.ConsoleWidth, p.ConsoleHeight = s.ConsoleSize[0], s.ConsoleSize[1]
	} else {
		p.Stdin, p.Stdout, p.Stderr = s.Stdin, s.Stdout, s.Stderr
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a subreaper: %w", err)
	}
	if err := c.lc.Run(p); err != nil {
		return nil, fmt.Errorf("start process in sandbox %s: %w", c.ID(), err)
	}
	e := &Exec{p: p}
	if s.Tty {
		con, err := recvFile(parent)
		if err != nil {
			_ = p.Signal(unix.SIGKILL)
			_, _ = p.Wait()
			return nil, fmt.Errorf("receive the terminal of the process: %w", err)
		}
		e.console = con
	}
	return e, nil
}

// Console is the master side of the process's terminal, or nil; the
// caller closes it once it has read the output.
func (e *Exec) Console() *os.File { return e.console }

// Kill kills the process.
func (e *Exec) Kill() error { return e.p.Signal(unix.SIGKILL) }

// Wait waits for the process to exit and returns its exit code, 128+N
// when signal N killed it, and that signal (0 if none).
func (e *Exec) Wait() (code int, signal unix.Signal, err error) {
	ps, err := e.p.Wait()
	if ps == nil {
		return 0, 0, fmt.Errorf("wait for process: %w", err)
	}
	// os.ProcessState carries a syscall.WaitStatus (not x/sys/unix's).
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), unix.Signal(ws.Signal()), nil
	}
	return ps.ExitCode(), 0, nil
}
