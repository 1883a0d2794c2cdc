package executor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/proc"
	"github.com/sbxrun/sbx/executor/internal/shell"
)

// attach is POST /v1/exec/attach: an interactive command whose input,
// output and terminal size travel as frames over the upgraded connection
// (see api.PathExecAttach). The caller going away kills the command.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.UpgradeAttach) {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("%s needs the headers Connection: Upgrade and Upgrade: %s", api.PathExecAttach, api.UpgradeAttach))
		return
	}
	var req api.AttachRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	if req.Stdin != "" || req.MaxOutputBytes != 0 {
		s.fail(w, badRequest("stdin and max_output_bytes do not apply to an attached command: send input as frames"))
		return
	}
	if s.isStopping() {
		s.fail(w, errStopping)
		return
	}
	argv := req.Argv
	switch {
	case len(argv) > 0 && req.Command != "":
		s.fail(w, badRequest("give either argv or command, not both"))
		return
	case req.Command != "":
		argv = []string{"/bin/sh", "-c", req.Command}
	case len(argv) == 0:
		s.fail(w, badRequest("argv or command is required"))
		return
	}
	if req.TimeoutS < 0 {
		s.fail(w, badRequest("timeout_s must not be negative"))
		return
	}
	ra, err := s.resolveRun(req.User, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	id, cred, dir := ra.id, ra.cred, ra.dir
	select {
	case s.execs <- struct{}{}:
		defer func() { <-s.execs }()
	default:
		writeError(w, http.StatusTooManyRequests, api.CodeLimit, fmt.Sprintf("%d commands already run; retry later", cap(s.execs)))
		return
	}
	env := proc.BuildEnv(s.env(), req.Env, id)
	if req.Tty && !hasEnv(env, "TERM") {
		env = append(env, "TERM=xterm")
	}

	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.fail(w, fmt.Errorf("take over the connection: %w", err))
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+api.UpgradeAttach+"\r\n\r\n"); err != nil {
		return
	}
	a := &attachment{conn: conn, in: brw.Reader}
	start := time.Now()
	res, err := s.runAttached(a, argv, dir, env, cred, req)
	if err != nil {
		body := api.ErrorBody{Code: api.CodeInternal, Message: err.Error()}
		data, _ := json.Marshal(body)
		_ = a.send(api.AttachError, data)
		return
	}
	res.DurationS = time.Since(start).Seconds()
	data, _ := json.Marshal(res)
	_ = a.send(api.AttachExit, data)
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

// attachment is the caller's side of an attached command.
type attachment struct {
	conn net.Conn
	in   *bufio.Reader
	mu   sync.Mutex
}

func (a *attachment) send(typ byte, payload []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return api.WriteAttachFrame(a.conn, typ, payload)
}

// runAttached starts the command on a terminal or on pipes, pumps frames
// both ways and returns its result once it has exited and its output is
// drained.
func (s *Server) runAttached(a *attachment, argv []string, dir string, env []string, cred *syscall.Credential, req api.AttachRequest) (api.ExecResult, error) {
	path, err := proc.LookPath(argv[0], env, dir)
	if err != nil {
		_ = a.send(api.AttachStderr, []byte(fmt.Sprintf("sbx: %v\r\n", err)))
		return api.ExecResult{ExitCode: 127}, nil
	}
	var (
		files   []*os.File // the child's 0, 1, 2
		stdin   *os.File   // where input frames go
		outputs []*os.File // what output frames come from, stdout first
		ptm     *os.File
		sys     = &syscall.SysProcAttr{Credential: cred}
	)
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	if req.Tty {
		cols, rows := req.Cols, req.Rows
		if cols == 0 || rows == 0 {
			cols, rows = 80, 24
		}
		var tty *os.File
		if ptm, tty, err = shell.OpenPTY(cols, rows); err != nil {
			return api.ExecResult{}, err
		}
		if cred != nil {
			_ = tty.Chown(int(cred.Uid), -1) // the command's own terminal, as login does
		}
		files = []*os.File{tty, tty, tty}
		stdin, outputs = ptm, []*os.File{ptm}
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return api.ExecResult{}, fmt.Errorf("stdin pipe: %w", err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW)
			return api.ExecResult{}, fmt.Errorf("stdout pipe: %w", err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW, outR, outW)
			return api.ExecResult{}, fmt.Errorf("stderr pipe: %w", err)
		}
		files = []*os.File{inR, outW, errW}
		stdin, outputs = inW, []*os.File{outR, errR}
		sys.Setpgid = true
	}
	p, err := s.sup.Start(path, argv, &os.ProcAttr{Dir: dir, Env: env, Files: files, Sys: sys})
	if req.Tty {
		files[0].Close()
	} else {
		closeAll(files...)
	}
	if err != nil {
		closeAll(stdin)
		if !req.Tty {
			closeAll(outputs...)
		}
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		_ = a.send(api.AttachStderr, []byte(fmt.Sprintf("sbx: %v\r\n", err)))
		return api.ExecResult{ExitCode: code}, nil
	}

	// Output: one pump per stream; drained closes when all reached EOF.
	drained := make(chan struct{})
	var wg sync.WaitGroup
	sendFailed := make(chan struct{})
	var failOnce sync.Once
	for i, f := range outputs {
		typ := api.AttachStdout
		if i == 1 {
			typ = api.AttachStderr
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bp := readBufs.Get().(*[]byte)
			defer readBufs.Put(bp)
			for {
				n, err := f.Read(*bp)
				if n > 0 && a.send(typ, (*bp)[:n]) != nil {
					failOnce.Do(func() { close(sendFailed) })
					return
				}
				if err != nil {
					return // EOF, or EIO on a terminal whose last user left
				}
			}
		}()
	}
	go func() { wg.Wait(); close(drained) }()

	// Input: frames from the caller until it goes away.
	gone := make(chan struct{})
	var closeStdin sync.Once
	go func() {
		defer close(gone)
		for {
			typ, payload, err := api.ReadAttachFrame(a.in, api.MaxAttachFrame)
			if err != nil {
				return
			}
			switch typ {
			case api.AttachStdin:
				if len(payload) == 0 && !req.Tty {
					closeStdin.Do(func() { stdin.Close() })
				} else {
					_, _ = stdin.Write(payload) // fails once closed
				}
			case api.AttachResize:
				if cols, rows, err := api.ParseResize(payload); err == nil && req.Tty && cols > 0 && rows > 0 {
					_ = shell.SetSize(ptm, cols, rows)
				}
			}
		}
	}()

	var timeout <-chan time.Time
	if req.TimeoutS > 0 {
		t := time.NewTimer(proc.Seconds(req.TimeoutS))
		defer t.Stop()
		timeout = t.C
	}
	timedOut := false
	select {
	case <-p.Done():
	case <-timeout:
		timedOut = true
	case <-gone:
	case <-sendFailed:
	}
	if !p.Exited() {
		_ = p.SignalGroup(unix.SIGKILL)
		<-p.Done()
	}
	if timedOut {
		_ = p.SignalGroup(unix.SIGKILL)
	}
	select {
	case <-drained:
	case <-time.After(pipeDrain):
		// Background children hold the output open; stop reading.
	}
	closeAll(outputs...)
	<-drained
	if !req.Tty {
		closeStdin.Do(func() { stdin.Close() })
	}
	code, sig := timedOutCode(p.ExitCode, timedOut)
	res := api.ExecResult{ExitCode: code, Signal: sig, TimedOut: timedOut}
	setUsage(&res, p)
	return res, nil
}
