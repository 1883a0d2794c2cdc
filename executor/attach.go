package executor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

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
	if req.Timeout < 0 {
		s.fail(w, badRequest("timeout_s must not be negative"))
		return
	}
	if _, err := execLimits(req.ExecRequest, nil); err != nil {
		s.fail(w, err)
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
	env := proc.BuildEnv(s.env(), requestEnv(req.Env), id)
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
	cmd := proc.Command{Argv: argv, Dir: dir, Env: env, Cred: cred}
	var (
		stdin   *os.File   // where input frames go
		outputs []*os.File // what output frames come from, stdout first
		ptm     *os.File
	)
	if req.Tty {
		cols, rows := req.Cols, req.Rows
		if cols == 0 || rows == 0 {
			cols, rows = 80, 24
		}
		var tty *os.File
		var err error
		if ptm, tty, err = shell.OpenPTY(cols, rows); err != nil {
			return api.ExecResult{}, err
		}
		if cred != nil {
			_ = tty.Chown(int(cred.Uid), -1) // the command's own terminal, as login does
		}
		cmd.Stdio = [3]*os.File{tty, tty, tty}
		cmd.Close = []*os.File{tty}
		cmd.Group = proc.TerminalSession
		stdin, outputs = ptm, []*os.File{ptm}
	} else {
		pipes := make([]*os.File, 0, 6) // read, write of stdin, stdout, stderr
		for range 3 {
			r, w, err := os.Pipe()
			if err != nil {
				closeFiles(pipes)
				return api.ExecResult{}, fmt.Errorf("attach pipes: %w", err)
			}
			pipes = append(pipes, r, w)
		}
		cmd.Stdio = [3]*os.File{pipes[0], pipes[3], pipes[5]}
		cmd.Close = cmd.Stdio[:]
		cmd.Group = proc.OwnGroup
		stdin, outputs = pipes[1], []*os.File{pipes[2], pipes[4]}
	}
	frames := []byte{api.AttachStdout, api.AttachStderr}
	out := proc.Output{Files: outputs, Sink: func(stream int, b []byte) error { return a.send(frames[stream], b) }}

	// Input: frames from the caller until it goes away.
	gone := make(chan struct{})
	var closeStdin sync.Once
	readInput := func(*proc.Process) {
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
	}
	oom := watchOOM()
	lim, _ := execLimits(req.ExecRequest, gone) // checked by attach
	r, err := s.sup.Run(cmd, out, lim, readInput)
	if !req.Tty {
		closeStdin.Do(func() { stdin.Close() })
	}
	if err != nil {
		_ = a.send(api.AttachStderr, []byte(fmt.Sprintf("sbx: %v\r\n", err)))
		return api.ExecResult{ExitCode: startCode(err)}, nil
	}
	return oom.note(execResult(r)), nil
}
