// Package shell runs persistent shell sessions on a pseudo-terminal, the way
// an AI agent uses a terminal: one command at a time, state (cwd, variables,
// functions, aliases) kept between commands, timeouts that return the output
// so far without killing anything, and input sent to a running program.
//
// Each command is written to a file and sourced by the shell (". FILE"), so
// that input of any length and shape (heredocs, loops, continuations, many
// lines) is one command whose exit code is that of its last line. The
// shell's PS1 is a marker carrying a random nonce, the exit code and the
// working directory; it ends each command and is cut from the output. The
// terminal does not echo, so the output holds only what the command printed.
// This works with bash, dash and busybox sh alike.
package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/outbuf"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// Defaults of a run request.
const (
	DefaultTimeout         = 120 * time.Second
	DefaultNoOutputTimeout = 30 * time.Second
	DefaultMaxOutput       = 64 << 10
	// MaxOutputLimit caps max_output_bytes, bounding a session's memory.
	MaxOutputLimit = 8 << 20
	// readyTimeout bounds how long a new shell may take to show its first
	// prompt (rc files included).
	readyTimeout = 20 * time.Second
	// drainDelay is how long output is still collected after the shell
	// exits, for jobs that keep the terminal open.
	drainDelay = 100 * time.Millisecond
)

// Errors of Run.
var (
	// ErrNotRunning: "" or input was sent while no command runs.
	ErrNotRunning = errors.New("no command is running in this session")
	// ErrCallWaiting: "" or input while another call waits on the session.
	ErrCallWaiting = errors.New("another call is waiting on this session; retry when it returns")
	// ErrClosed: the session was deleted.
	ErrClosed = errors.New("session is closed")
)

// Options say how to start the shell of a session.
type Options struct {
	Argv       []string // the shell: argv[0] an absolute path, without -i
	Env        []string
	Dir        string
	User       proc.Identity
	Credential *syscall.Credential
	// ScratchDir is a private directory for the command file; the session
	// creates it and removes it on Close.
	ScratchDir string
	// Budget bounds the output held by all sessions and commands (nil:
	// unbounded).
	Budget *outbuf.Budget
}

// Session is one persistent shell. Its methods are safe for concurrent use.
type Session struct {
	ID   string
	opts Options
	sup  *proc.Supervisor

	call chan struct{} // held by the one Run call in progress

	mu       sync.Mutex
	sh       *incarnation // the current shell; nil after it died
	closed   bool
	state    cmdState
	lastMark marker
	maxOut   int
	out      *outbuf.Buffer
	outSeen  bool // output arrived since the last wait started
	notify   chan struct{}
	notice   string // told with the next reply
	oldSids  []int  // sessions of earlier shells, killed on Close
	cmdFile  string
	cmdFD    int    // cmdFile, open for writing: each command is written in place
	postFile string // re-establishes the marker prompt after each command
	echoLine string
}

// cmdState is where the session's current command is.
type cmdState int

const (
	idle    cmdState = iota // nothing runs; the last result was reported
	running                 // a command was sent; its marker has not come
	done                    // its marker came; not reported yet
	exited                  // the shell died while it ran; not reported yet
)

// incarnation is one shell process and its terminal.
type incarnation struct {
	p       *proc.Process
	ptm     *os.File
	nonce   string
	scan    *scanner
	ready   chan struct{}
	readEOF chan struct{}
	dead    bool
	status  int
}

// New starts a session's shell and waits for its first prompt.
func New(ctx context.Context, sup *proc.Supervisor, id string, opts Options) (*Session, error) {
	s := &Session{
		ID:     id,
		opts:   opts,
		sup:    sup,
		call:   make(chan struct{}, 1),
		out:    outbuf.NewShared(DefaultMaxOutput, opts.Budget),
		maxOut: DefaultMaxOutput,
		notify: make(chan struct{}, 1),
	}
	if err := os.MkdirAll(opts.ScratchDir, 0o700); err != nil {
		return nil, fmt.Errorf("create session scratch directory: %w", err)
	}
	s.cmdFile = filepath.Join(opts.ScratchDir, "cmd")
	s.postFile = filepath.Join(opts.ScratchDir, "prompt")
	for _, p := range []string{s.cmdFile, s.postFile} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			os.RemoveAll(opts.ScratchDir)
			return nil, fmt.Errorf("create command file: %w", err)
		}
	}
	for _, p := range []string{opts.ScratchDir, s.cmdFile, s.postFile} {
		if err := os.Chown(p, int(opts.User.UID), int(opts.User.GID)); err != nil && os.Geteuid() == 0 {
			os.RemoveAll(opts.ScratchDir)
			return nil, fmt.Errorf("chown %s: %w", p, err)
		}
	}
	// The command file stays open: each command is written into the same
	// inode, two system calls instead of a path walk, truncation and close,
	// and never through whatever the session's user put at its path.
	fd, err := unix.Open(s.cmdFile, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		os.RemoveAll(opts.ScratchDir)
		return nil, fmt.Errorf("open command file: %w", err)
	}
	s.cmdFD = fd
	// The prompt file runs right after each command, in the same line, so
	// whatever the command did to PS1 or PROMPT_COMMAND (sourcing an rc
	// file, say) the marker prompt comes back.
	s.echoLine = " . '" + s.cmdFile + "'; . '" + s.postFile + "'"
	if err := s.start(ctx, opts.Dir); err != nil {
		unix.Close(s.cmdFD)
		os.RemoveAll(opts.ScratchDir)
		return nil, err
	}
	return s, nil
}

// writeCommand replaces the content of the command file with cmd and a
// newline.
func (s *Session) writeCommand(cmd string) error {
	data := []byte(cmd + "\n")
	for off := 0; off < len(data); {
		n, err := unix.Pwrite(s.cmdFD, data[off:], int64(off))
		if err != nil {
			return err
		}
		off += n
	}
	return unix.Ftruncate(s.cmdFD, int64(len(data)))
}

func newNonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start launches a new shell in dir. Callers hold no lock.
func (s *Session) start(ctx context.Context, dir string) error {
	ptm, tty, err := openPTY()
	if err != nil {
		return err
	}
	defer tty.Close()
	if err := setNoEcho(ptm); err != nil {
		ptm.Close()
		return err
	}
	if os.Geteuid() == 0 {
		_ = tty.Chown(int(s.opts.User.UID), int(s.opts.User.GID))
	}
	sh := &incarnation{
		ptm:     ptm,
		nonce:   newNonce(),
		ready:   make(chan struct{}),
		readEOF: make(chan struct{}),
	}
	sh.scan = newScanner(sh.nonce)
	if err := os.WriteFile(s.postFile, []byte(promptScript(sh.nonce, s.postFile)), 0o600); err != nil {
		ptm.Close()
		return fmt.Errorf("write the prompt file: %w", err)
	}
	argv := append(append([]string{}, s.opts.Argv...), interactiveFlags(s.opts.Argv)...)
	p, err := s.sup.Start(argv[0], argv, &os.ProcAttr{
		Dir:   dir,
		Env:   s.opts.Env,
		Files: []*os.File{tty, tty, tty},
		Sys: &syscall.SysProcAttr{
			Setsid:     true,
			Setctty:    true,
			Ctty:       0,
			Credential: s.opts.Credential,
		},
	})
	if err != nil {
		ptm.Close()
		return fmt.Errorf("start shell %s: %w", argv[0], err)
	}
	sh.p = p
	s.mu.Lock()
	s.sh = sh
	s.state = idle
	s.mu.Unlock()
	go s.read(sh)
	go s.watch(sh)
	// PS1 is set after the rc files ran, so they cannot replace it.
	initLine := " . '" + s.postFile + "'\n"
	if _, err := ptm.Write([]byte(initLine)); err != nil {
		s.kill(sh)
		return fmt.Errorf("initialise shell: %w", err)
	}
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-sh.ready:
		return nil
	case <-sh.readEOF:
		s.kill(sh)
		return fmt.Errorf("shell %s exited before its first prompt", argv[0])
	case <-timer.C:
		s.kill(sh)
		return fmt.Errorf("shell %s showed no prompt within %s", argv[0], readyTimeout)
	case <-ctx.Done():
		s.kill(sh)
		return ctx.Err()
	}
}

// promptScript is the prompt file of a shell whose markers carry nonce. It
// keeps the exit status of the command before it ($? when it starts),
// sets the marker prompt, and exports two hooks that give a shell the
// command replaced itself with (exec bash, exec sh) the same prompt:
// PROMPT_COMMAND (bash runs it before every prompt) and ENV (sh, dash and
// busybox read it when they start interactive); a nested interactive shell
// takes over the session the same way. Its last command returns
// the saved status, so $? and the marker report the command's.
func promptScript(nonce, self string) string {
	q := "'" + self + "'"
	return "__sbx_rc=$?\n" +
		"PS1='\036SBX" + nonce + ":$?:$PWD\037'\n" +
		"PS2=''\n" +
		"PS0=''\n" +
		"unset PROMPT_COMMAND\n" +
		"PROMPT_COMMAND=\". " + q + "\"\n" +
		"ENV=" + q + "\n" +
		"export PROMPT_COMMAND ENV\n" +
		// A bash started by exec edits lines with readline; its bracketed
		// paste escapes would show in the output.
		"[ -n \"$BASH_VERSION\" ] && bind 'set enable-bracketed-paste off' 2>/dev/null\n" +
		"__sbx_status() { return \"$1\"; }\n" +
		"__sbx_status \"$__sbx_rc\"\n"
}

// openPTY opens a pseudo-terminal of 200x50.
func openPTY() (ptm, tty *os.File, err error) { return OpenPTY(200, 50) }

// OpenPTY opens a pseudo-terminal of cols x rows. creack/pty leaves the
// master in blocking mode (it uses File.Fd); the master returned here is a
// non-blocking duplicate on Go's poller, so that closing it interrupts a
// pending read.
func OpenPTY(cols, rows uint16) (ptm, tty *os.File, err error) {
	blocking, tty, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer blocking.Close()
	if err := pty.Setsize(blocking, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("set terminal size: %w", err)
	}
	fd, err := unix.FcntlInt(blocking.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("duplicate the terminal master: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}

// interactiveFlags makes the shell interactive (prompts, job control, C-c
// returns to the prompt) and, for bash, turns off readline, which would
// echo input itself.
func interactiveFlags(argv []string) []string {
	if filepath.Base(argv[0]) == "bash" {
		return []string{"--noediting", "-i"}
	}
	return []string{"-i"}
}

// SetSize changes the size of the terminal whose master is ptm.
func SetSize(ptm *os.File, cols, rows uint16) error {
	rc, err := ptm.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return err
	}
	return ioErr
}

// setNoEcho turns off terminal echo, keeping line editing and signals.
func setNoEcho(ptm *os.File) error {
	rc, err := ptm.SyscallConn()
	if err != nil {
		return fmt.Errorf("terminal attributes: %w", err)
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		t, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		if err != nil {
			ioErr = fmt.Errorf("read terminal attributes: %w", err)
			return
		}
		want := t.Lflag&^(unix.ECHO|unix.ECHONL) | unix.ICANON | unix.ISIG
		if t.Lflag == want {
			return // already so: most commands leave the terminal alone
		}
		t.Lflag = want
		if err := unix.IoctlSetTermios(int(fd), unix.TCSETS, t); err != nil {
			ioErr = fmt.Errorf("set terminal attributes: %w", err)
		}
	})
	if err != nil {
		return fmt.Errorf("terminal attributes: %w", err)
	}
	return ioErr
}

// kill ends a shell that failed to start.
func (s *Session) kill(sh *incarnation) {
	proc.SignalSession(sh.p.Pid, unix.SIGKILL)
	_ = sh.p.Signal(unix.SIGKILL)
	sh.ptm.Close()
}

// read copies the terminal's output into the session until the terminal
// closes.
func (s *Session) read(sh *incarnation) {
	defer close(sh.readEOF)
	buf := make([]byte, 32<<10)
	for {
		n, err := sh.ptm.Read(buf)
		if n > 0 {
			s.mu.Lock()
			sh.scan.feed(buf[:n], func(b []byte) { s.output(sh, b) }, func(m marker) { s.marked(sh, m) })
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			sh.scan.flush(func(b []byte) { s.output(sh, b) })
			s.mu.Unlock()
			return
		}
	}
}

// output records command output; output outside a command (a background
// job printing between commands, the banner before the first prompt) is
// dropped. Called with mu held.
func (s *Session) output(sh *incarnation, b []byte) {
	if sh != s.sh || s.state != running || s.closed {
		return
	}
	s.out.Write(b)
	s.outSeen = true
	s.wake()
}

// marked handles a prompt. Called with mu held.
func (s *Session) marked(sh *incarnation, m marker) {
	select {
	case <-sh.ready:
	default:
		close(sh.ready)
		return
	}
	if sh != s.sh {
		return
	}
	s.lastMark = m
	if s.state == running {
		s.state = done
		s.wake()
	}
}

// watch waits for the shell to exit, lets the reader drain, and marks the
// shell dead.
func (s *Session) watch(sh *incarnation) {
	<-sh.p.Done()
	select {
	case <-sh.readEOF:
	case <-time.After(drainDelay):
	}
	code, _ := sh.p.ExitCode()
	s.mu.Lock()
	sh.dead, sh.status = true, code
	if s.sh == sh {
		if s.state == running {
			s.state = exited
		}
		s.wake()
	}
	s.mu.Unlock()
	// Jobs still holding the terminal get EIO from now on.
	sh.ptm.Close()
}

func (s *Session) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Stop says how a running command is stopped when a run call's timeout
// passes or its caller goes away; the zero Stop leaves it running.
type Stop struct {
	Signal unix.Signal
	Grace  time.Duration
}

// Run runs, continues or feeds input to a command, as req says; at the
// call's timeout or when ctx ends, stop says whether the command is
// stopped.
func (s *Session) Run(ctx context.Context, req api.RunRequest, stop Stop) (api.RunResult, error) {
	select {
	case s.call <- struct{}{}:
		defer func() { <-s.call }()
	default:
		if req.Command == "" || req.IsInput {
			return api.RunResult{}, ErrCallWaiting
		}
		return api.RunResult{Status: api.StatusBusy, Notice: "another call is waiting on this session; the command was not run"}, nil
	}
	timeout := DefaultTimeout
	if req.TimeoutS > 0 {
		timeout = proc.Seconds(req.TimeoutS)
	}
	noOutput := DefaultNoOutputTimeout
	if req.NoOutputTimeoutS != nil {
		noOutput = proc.Seconds(*req.NoOutputTimeoutS)
	}
	maxOut := DefaultMaxOutput
	if req.MaxOutputBytes > 0 {
		maxOut = min(req.MaxOutputBytes, MaxOutputLimit)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return api.RunResult{}, ErrClosed
	}
	s.maxOut = maxOut
	if req.Command == "" || req.IsInput {
		sh := s.sh
		switch s.state {
		case idle:
			s.mu.Unlock()
			if req.IsInput {
				return api.RunResult{}, fmt.Errorf("%w: send the text as a command, without is_input", ErrNotRunning)
			}
			return api.RunResult{}, ErrNotRunning
		case running:
			if req.IsInput {
				data := []byte(req.Command + "\n")
				if c, ok := controlKeys[req.Command]; ok {
					data = []byte{c}
				}
				if _, err := sh.ptm.Write(data); err != nil {
					s.mu.Unlock()
					return api.RunResult{}, fmt.Errorf("write to the terminal: %w", err)
				}
			}
		}
		s.mu.Unlock()
		return s.wait(ctx, timeout, noOutput, stop)
	}
	if s.state == running {
		res := s.drain(api.StatusBusy)
		res.Notice = "a command is still running; this command was not run. Send \"\" to wait for it, or is_input with C-c to interrupt it"
		s.mu.Unlock()
		return res, nil
	}
	dead := s.sh == nil || s.sh.dead
	s.mu.Unlock()
	if dead {
		if err := s.restart(ctx); err != nil {
			return api.RunResult{}, err
		}
	}
	s.mu.Lock()
	sh := s.sh
	if err := s.writeCommand(req.Command); err != nil {
		s.mu.Unlock()
		return api.RunResult{}, fmt.Errorf("write the command file: %w", err)
	}
	// A program may have left echo on; the typed line must not show.
	_ = setNoEcho(sh.ptm)
	s.out.Release()
	s.out = outbuf.NewShared(maxOut, s.opts.Budget)
	s.state = running
	_, err := sh.ptm.Write([]byte(s.echoLine + "\n"))
	s.mu.Unlock()
	if err != nil {
		return api.RunResult{}, fmt.Errorf("write to the terminal: %w", err)
	}
	return s.wait(ctx, timeout, noOutput, stop)
}

// controlKeys are the inputs sent as one control character, no newline.
var controlKeys = map[string]byte{"C-c": 0x03, "C-d": 0x04, "C-z": 0x1a, `C-\`: 0x1c}

// wait returns when the command ends, the shell dies, or a timeout passes.
func (s *Session) wait(ctx context.Context, timeout, noOutput time.Duration, stop Stop) (api.RunResult, error) {
	hard := time.NewTimer(timeout)
	defer hard.Stop()
	var quiet *time.Timer
	var quietC <-chan time.Time
	if noOutput > 0 {
		quiet = time.NewTimer(noOutput)
		defer quiet.Stop()
		quietC = quiet.C
	}
	s.mu.Lock()
	s.outSeen = false
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if res, ok := s.finished(); ok {
			s.mu.Unlock()
			return res, nil
		}
		if s.closed {
			s.mu.Unlock()
			return api.RunResult{}, ErrClosed
		}
		if s.outSeen && quiet != nil {
			s.outSeen = false
			quiet.Reset(noOutput)
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-hard.C:
			return s.timedOut(api.ReasonTimeout, stop), nil
		case <-quietC:
			s.mu.Lock()
			seen := s.outSeen
			s.mu.Unlock()
			if seen {
				continue
			}
			return s.timedOut(api.ReasonNoOutput, stop), nil
		case <-ctx.Done():
			if stop.Signal != 0 {
				s.stopCommand(stop) // the caller is gone: its command goes too
			}
			return api.RunResult{}, ctx.Err()
		}
	}
}

// finished reports the end of the command, if it has ended. Called with mu
// held.
func (s *Session) finished() (api.RunResult, bool) {
	switch s.state {
	case done:
		s.state = idle
		res := s.drain(api.StatusCompleted)
		code := s.lastMark.exitCode
		res.ExitCode, res.Cwd = &code, s.lastMark.cwd
		return res, true
	case exited:
		s.state = idle
		res := s.drain(api.StatusExited)
		code := s.sh.status
		res.ExitCode = &code
		res.Notice = fmt.Sprintf("the shell exited with status %d; the next command starts a fresh shell", code)
		return res, true
	}
	return api.RunResult{}, false
}

// timedOut is the reply at a timeout of the call: the output so far with
// the command left running, or, with a stop, how the stopped command
// ended.
func (s *Session) timedOut(reason string, stop Stop) api.RunResult {
	stopped := stop.Signal != 0 && s.stopCommand(stop)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.finished(); ok {
		if stopped {
			res.Reason = reason
			res.Notice = strings.TrimSpace(res.Notice + " " + fmt.Sprintf("the command was stopped at the %s of this call (%s)", strings.ReplaceAll(reason, "_", " "), unix.SignalName(stop.Signal)))
		}
		// Else the command ended right at the deadline: report it as ended.
		return res
	}
	res := s.drain(api.StatusRunning)
	res.Reason = reason
	return res
}

// stopCommand stops the running command and reports whether it was
// running: stop.Signal to the terminal's foreground process group (the
// command's job; SIGINT to the shell when the shell itself runs the
// command, as C-c does, since an interactive shell ignores SIGTERM),
// SIGKILL to that group stop.Grace later, and, should the shell still not
// be back at its prompt a second after that, SIGKILL to the whole
// terminal session, so that the next command starts a fresh shell.
func (s *Session) stopCommand(stop Stop) bool {
	s.mu.Lock()
	sh, st := s.sh, s.state
	s.mu.Unlock()
	if sh == nil || sh.dead || st != running {
		return false
	}
	pg := foregroundGroup(sh.ptm)
	job := pg > 0 && pg != sh.p.Pid
	grace := stop.Grace
	switch {
	case stop.Signal == unix.SIGKILL:
		grace = 0
	case job:
		_ = unix.Kill(-pg, stop.Signal)
	default:
		_ = unix.Kill(-sh.p.Pid, unix.SIGINT)
	}
	if s.endsWithin(grace) {
		return true
	}
	if job {
		_ = unix.Kill(-pg, unix.SIGKILL)
		if s.endsWithin(time.Second) {
			return true
		}
	}
	proc.SignalSession(sh.p.Pid, unix.SIGKILL)
	_ = sh.p.Signal(unix.SIGKILL)
	s.endsWithin(5 * time.Second)
	return true
}

// endsWithin waits up to d for the running command to end (its prompt
// came, or the shell died).
func (s *Session) endsWithin(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		st := s.state
		s.mu.Unlock()
		if st != running {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// foregroundGroup is the foreground process group of the terminal whose
// master is ptm (0 when it cannot be read).
func foregroundGroup(ptm *os.File) int {
	rc, err := ptm.SyscallConn()
	if err != nil {
		return 0
	}
	pg := 0
	_ = rc.Control(func(fd uintptr) { pg, _ = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) })
	return pg
}

// drain takes the output gathered since the last reply. Called with mu
// held.
func (s *Session) drain(status string) api.RunResult {
	res := api.RunResult{Status: status, Truncated: s.out.Truncated(), Notice: s.notice}
	s.notice = ""
	out := s.out.Bytes()
	s.out.Release()
	s.out = outbuf.NewShared(s.maxOut, s.opts.Budget)
	// A "\r" at the end may be half of a "\r\n" still on its way.
	if status != api.StatusCompleted && status != api.StatusExited && bytes.HasSuffix(out, []byte("\r")) {
		out = out[:len(out)-1]
		s.out.Write([]byte("\r"))
	}
	res.Output = normalize(out, s.echoLine)
	return res
}

// normalize turns terminal line endings into "\n" and drops the echo of the
// typed command line should a program have turned echo back on.
func normalize(b []byte, echo string) string {
	for bytes.Contains(b, []byte("\r\r\n")) {
		b = bytes.ReplaceAll(b, []byte("\r\r\n"), []byte("\r\n"))
	}
	b = bytes.TrimPrefix(b, []byte(echo+"\r\n"))
	return string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
}

// restart replaces a dead shell with a fresh one in the last known working
// directory.
func (s *Session) restart(ctx context.Context) error {
	s.mu.Lock()
	dir := s.opts.Dir
	if s.lastMark.cwd != "" {
		if fi, err := os.Stat(s.lastMark.cwd); err == nil && fi.IsDir() {
			dir = s.lastMark.cwd
		}
	}
	status := -1
	if s.sh != nil {
		s.oldSids = append(s.oldSids, s.sh.p.Pid)
		status = s.sh.status
	}
	s.sh = nil
	s.mu.Unlock()
	if err := s.start(ctx, dir); err != nil {
		return fmt.Errorf("restart the shell: %w", err)
	}
	s.mu.Lock()
	s.notice = fmt.Sprintf("the previous shell exited with status %d; this command ran in a fresh shell in %s (variables, functions and aliases were reset)", status, dir)
	s.mu.Unlock()
	return nil
}

// Info describes the session.
func (s *Session) Info() api.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := api.Session{ID: s.ID, Shell: strings.Join(s.opts.Argv, " "), Running: s.state == running, Cwd: s.opts.Dir}
	if s.lastMark.cwd != "" {
		info.Cwd = s.lastMark.cwd
	}
	if s.sh != nil && !s.sh.dead {
		info.PID = s.sh.p.Pid
	}
	return info
}

// Close kills the shell and every process of its terminal sessions, and
// removes the scratch directory.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.out.Release()
	sh := s.sh
	sids := append([]int{}, s.oldSids...)
	s.wake()
	s.mu.Unlock()
	if sh != nil {
		sids = append(sids, sh.p.Pid)
	}
	for _, sid := range sids {
		proc.SignalSession(sid, unix.SIGKILL)
	}
	if sh != nil {
		_ = sh.p.Signal(unix.SIGKILL)
		<-sh.p.Done()
		sh.ptm.Close()
	}
	unix.Close(s.cmdFD)
	os.RemoveAll(s.opts.ScratchDir)
}

// Signal sends sig to every process of the session's current shell.
func (s *Session) Signal(sig unix.Signal) {
	s.mu.Lock()
	sh := s.sh
	s.mu.Unlock()
	if sh != nil && !sh.dead {
		proc.SignalSession(sh.p.Pid, sig)
	}
}
