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
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
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
	// pipeDrain is how long output is still read after the command exits,
	// for background children that keep its pipes open.
	pipeDrain = 250 * time.Millisecond
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
// going away, kills the whole group.
func (s *Server) runCommand(ctx context.Context, req api.ExecRequest, sink func(stream string, b []byte) error) (api.ExecResult, error) {
	if s.isStopping() {
		return api.ExecResult{}, errStopping
	}
	argv, err := execArgv(req)
	if err != nil {
		return api.ExecResult{}, err
	}
	ra, err := s.resolveRun(req.User, req.Cwd)
	if err != nil {
		return api.ExecResult{}, err
	}
	id, cred, dir := ra.id, ra.cred, ra.dir
	env := proc.BuildEnv(s.env(), req.Env, id)
	start := time.Now()
	path, err := proc.LookPath(argv[0], env, dir)
	if err != nil {
		return failedStart(127, err, start, sink), nil
	}

	stdin := s.devNull
	var stdinW *os.File
	if req.Stdin != "" {
		if stdin, stdinW, err = os.Pipe(); err != nil {
			return api.ExecResult{}, fmt.Errorf("stdin pipe: %w", err)
		}
	}
	closeStdin := func() {
		if stdin != s.devNull {
			stdin.Close()
		}
	}
	outR, outW, err := outputPipe()
	if err != nil {
		closeStdin()
		return api.ExecResult{}, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := outputPipe()
	if err != nil {
		closeStdin()
		outR.Close()
		outW.Close()
		return api.ExecResult{}, fmt.Errorf("stderr pipe: %w", err)
	}
	p, err := s.sup.Start(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []*os.File{stdin, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	})
	closeStdin()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		code := 126
		if errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return failedStart(code, err, start, sink), nil
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, strings.NewReader(req.Stdin))
			stdinW.Close()
		}()
	}

	// drained closes when both streams reached EOF (or gave up).
	drained := make(chan struct{})
	var readersLeft atomic.Int32
	readersLeft.Store(2)
	sinkFailed := make(chan struct{})
	var failOnce sync.Once
	pump := func(r *os.File, stream string) {
		defer func() {
			if readersLeft.Add(-1) == 0 {
				close(drained)
			}
		}()
		bp := readBufs.Get().(*[]byte)
		defer readBufs.Put(bp)
		buf := *bp
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if sink(stream, buf[:n]) != nil {
					failOnce.Do(func() { close(sinkFailed) })
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pump(outR, api.FrameStdout)
	go pump(errR, api.FrameStderr)

	var timeout <-chan time.Time
	if req.TimeoutS > 0 {
		t := time.NewTimer(proc.Seconds(req.TimeoutS))
		defer t.Stop()
		timeout = t.C
	}
	timedOut := false
	kill := func() {
		_ = p.SignalGroup(unix.SIGKILL)
		<-p.Done()
	}
	// The pipes close as the command exits: reap it at once rather than
	// through the SIGCHLD hop (SIGCHLD still reaps it should it not be a
	// zombie yet).
	waitExit := func() {
		select {
		case <-p.Done():
		case <-timeout:
			timedOut = true
			kill()
		case <-ctx.Done():
			kill()
		case <-sinkFailed:
			kill()
		}
	}
	select {
	case <-drained:
		s.sup.Reap()
	case <-p.Done():
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
	case <-sinkFailed:
	}
	if timedOut {
		kill()
	} else {
		waitExit()
	}
	if timedOut {
		// Members of the group that outlived the leader die too.
		_ = p.SignalGroup(unix.SIGKILL)
	}
	select {
	case <-drained:
	default:
		drainTimer := time.NewTimer(pipeDrain)
		select {
		case <-drained:
		case <-drainTimer.C:
			// Background children hold the pipes open; stop reading.
			outR.Close()
			errR.Close()
			<-drained
		}
		drainTimer.Stop()
	}
	outR.Close()
	errR.Close()
	code, sig := timedOutCode(p.ExitCode, timedOut)
	res := api.ExecResult{
		ExitCode:  code,
		Signal:    sig,
		TimedOut:  timedOut,
		DurationS: time.Since(start).Seconds(),
	}
	setUsage(&res, p)
	return res, nil
}

// outputPipe returns a pipe for a command's output: the read end on Go's
// poller, the write end (the command's, closed here once it started) a
// plain blocking descriptor, as the command expects it. os.Pipe would put
// both ends on the poller and take the write end off it again at the
// start: ten system calls more for each command.
func outputPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// setUsage fills the CPU times and peak memory of a reaped command.
func setUsage(res *api.ExecResult, p *proc.Process) {
	user, sys, maxRSS := p.Usage()
	res.UserTimeS, res.SysTimeS = user.Seconds(), sys.Seconds()
	res.CPUTimeS = (user + sys).Seconds()
	res.MemoryPeakBytes = maxRSS
}

// readBufs recycles the buffers that read command output.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// failedStart is the result of a command that could not start: exit code
// 127 (not found) or 126 (not executable), as a shell reports them, with
// the reason on stderr.
func failedStart(code int, err error, start time.Time, sink func(string, []byte) error) api.ExecResult {
	_ = sink(api.FrameStderr, []byte(fmt.Sprintf("sbx: %v\n", err)))
	return api.ExecResult{ExitCode: code, DurationS: time.Since(start).Seconds()}
}

// timedOutCode is the exit code and signal of a command (exit): those of
// its end, except that a command killed for its timeout exits 124 (its
// signal still SIGKILL), as sbx run and sbx exec --timeout report it.
func timedOutCode(exit func() (int, string), timedOut bool) (int, string) {
	code, sig := exit()
	if timedOut {
		code = sbx.ExitTimeout
	}
	return code, sig
}
