package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/outbuf"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// Exec limits.
const (
	// DefaultExecOutput is the default max_output_bytes of /v1/exec, per
	// stream (stdout and stderr each).
	DefaultExecOutput = 1 << 20
	// MaxExecOutput caps max_output_bytes; Config.OutputBudget bounds the
	// output held by all commands and sessions together.
	MaxExecOutput = 8 << 20
)

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	select {
	case s.execs <- struct{}{}:
		defer func() { <-s.execs }()
	default:
		writeError(w, http.StatusTooManyRequests, api.CodeLimit, fmt.Sprintf("%d commands already run; retry later", cap(s.execs)))
		return
	}
	if req.Detach {
		res, err := s.startDetached(req)
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	if r.URL.Query().Get("stream") == "1" || r.URL.Query().Get("stream") == "true" {
		s.execStream(w, r, req)
		return
	}
	maxOut := DefaultExecOutput
	if req.MaxOutputBytes > 0 {
		maxOut = min(req.MaxOutputBytes, MaxExecOutput)
	}
	stdout, stderr := outbuf.NewShared(maxOut, s.outBudget), outbuf.NewShared(maxOut, s.outBudget)
	defer stdout.Release()
	defer stderr.Release()
	var mu sync.Mutex
	res, err := s.runCommand(r.Context(), req, func(stream string, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if stream == api.FrameStdout {
			stdout.Write(b)
		} else {
			stderr.Write(b)
		}
		return nil
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	res.Stdout, res.Stderr = string(stdout.Bytes()), string(stderr.Bytes())
	res.Truncated = stdout.Truncated() || stderr.Truncated()
	writeJSON(w, http.StatusOK, res)
}

// execStream sends output frames as they come, then the result frame.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, req api.ExecRequest) {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	var mu sync.Mutex
	send := func(f api.ExecFrame) error {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(f); err != nil {
			return err
		}
		return rc.Flush()
	}
	res, err := s.runCommand(r.Context(), req, func(stream string, b []byte) error {
		return send(api.ExecFrame{Type: stream, Data: string(b)})
	})
	if err != nil {
		body := api.ErrorBody{Code: api.CodeInternal, Message: err.Error()}
		var ae *apiError
		if errors.As(err, &ae) {
			body.Code = ae.code
		}
		_ = send(api.ExecFrame{Type: api.FrameError, Error: &body})
		return
	}
	_ = send(api.ExecFrame{Type: api.FrameResult, Result: &res})
}

// runCommand runs one command to its end, passing output to sink as it is
// read. The command gets its own process group; the timeout, or the caller
// going away, stops the whole group (execLimits).
func (s *Server) runCommand(ctx context.Context, req api.ExecRequest, sink func(stream string, b []byte) error) (api.ExecResult, error) {
	if s.isStopping() {
		return api.ExecResult{}, errStopping
	}
	argv, err := execArgv(req)
	if err != nil {
		return api.ExecResult{}, err
	}
	lim, err := execLimits(req, ctx.Done())
	if err != nil {
		return api.ExecResult{}, err
	}
	ra, err := s.resolveRun(req.User, req.Cwd)
	if err != nil {
		return api.ExecResult{}, err
	}
	start := time.Now()
	oom := watchOOM()
	cmd := proc.Command{Argv: argv, Dir: ra.dir, Env: proc.BuildEnv(s.env(), requestEnv(req.Env), ra.id), Cred: ra.cred, Group: proc.OwnGroup}
	cmd.Stdio[0] = s.devNull
	var stdinW *os.File
	if req.Stdin != "" {
		if cmd.Stdio[0], stdinW, err = os.Pipe(); err != nil {
			return api.ExecResult{}, fmt.Errorf("stdin pipe: %w", err)
		}
		cmd.Close = append(cmd.Close, cmd.Stdio[0])
	}
	var outputs []*os.File
	for i := 1; i <= 2; i++ {
		r, w, err := proc.OutputPipe()
		if err != nil {
			closeFiles(cmd.Close, append(outputs, stdinW)...)
			return api.ExecResult{}, err
		}
		cmd.Stdio[i] = w
		cmd.Close = append(cmd.Close, w)
		outputs = append(outputs, r)
	}
	out := proc.Output{Files: outputs, Sink: func(stream int, b []byte) error {
		return sink(frameTypes[stream], b)
	}}
	r, err := s.sup.Run(cmd, out, lim, func(*proc.Process) {
		if stdinW != nil {
			go func() {
				_, _ = io.Copy(stdinW, strings.NewReader(req.Stdin))
				stdinW.Close()
			}()
		}
	})
	if err != nil {
		closeFiles(nil, stdinW)
		return failedStart(err, start, sink), nil
	}
	return oom.note(execResult(r)), nil
}

// frameTypes are the exec frame types of a command's output streams.
var frameTypes = []string{api.FrameStdout, api.FrameStderr}

// closeFiles closes each file that is not nil.
func closeFiles(fs []*os.File, more ...*os.File) {
	for _, f := range append(fs, more...) {
		if f != nil {
			f.Close()
		}
	}
}

// execResult is the reply of a command that ran.
func execResult(r proc.Result) api.ExecResult {
	return api.ExecResult{
		ExitCode:        r.ExitCode,
		Signal:          r.Signal,
		TimedOut:        r.TimedOut,
		DurationS:       r.Duration.Seconds(),
		UserTimeS:       r.User.Seconds(),
		SysTimeS:        r.Sys.Seconds(),
		CPUTimeS:        (r.User + r.Sys).Seconds(),
		MemoryPeakBytes: r.MaxRSSBytes,
	}
}

// failedStart is the result of a command that could not start (a
// *proc.StartError): exit code 127 (not found) or 126 (not executable), as
// a shell reports them, with the reason on stderr.
func failedStart(err error, start time.Time, sink func(string, []byte) error) api.ExecResult {
	_ = sink(api.FrameStderr, []byte(fmt.Sprintf("sbx: %v\n", err)))
	return api.ExecResult{ExitCode: startCode(err), DurationS: time.Since(start).Seconds()}
}

// startCode is the exit code of a command that could not start.
func startCode(err error) int {
	var se *proc.StartError
	if errors.As(err, &se) {
		return se.Code
	}
	return 126
}

// requestEnv is an exec request's environment as proc.BuildEnv takes it.
// The request came as JSON, whose env is an object: every entry has its
// "=".
func requestEnv(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
