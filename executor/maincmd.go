package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/logring"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// Main command timing.
const (
	// restartBackoffMin and restartBackoffMax bound the wait before a
	// restart; it doubles with each failure in a row.
	restartBackoffMin = 100 * time.Millisecond
	restartBackoffMax = 10 * time.Second
	// stableRun is how long a run must last for the back-off to start
	// over at its minimum.
	stableRun = 10 * time.Second
	// recentExits is how many ends a status reports.
	recentExits = 10
	// logReadChunk bounds the output sent per ring read of a log stream.
	logReadChunk = 64 << 10
	// defaultStopGrace is the default grace of POST /v1/maincmd/stop.
	defaultStopGrace = 10 * time.Second
)

// mainCmd is the sandbox's supervised main command.
type mainCmd struct {
	spec api.MainCmdSpec
	env  []string
	dir  string
	cred *syscall.Credential
	ring *logring.Ring

	mu       sync.Mutex
	state    string
	proc     *proc.Process
	started  time.Time
	restarts int
	exits    []api.MainCmdExit
	stopping bool
	stopCh   chan struct{} // closed when a stop is asked for: no restart
	ended    chan struct{} // closed when the main command ended for good
	changed  chan struct{} // closed and replaced at every state change
}

// startMainCmd handles POST /v1/maincmd.
func (s *Server) startMainCmd(w http.ResponseWriter, r *http.Request) {
	var spec api.MainCmdSpec
	if err := decode(w, r, &spec); err != nil {
		s.fail(w, err)
		return
	}
	if err := validateMainCmd(&spec); err != nil {
		s.fail(w, err)
		return
	}
	if spec.CreateCwd {
		if err := s.makeMainCmdDir(spec.User, spec.Cwd); err != nil {
			s.fail(w, err)
			return
		}
	}
	ra, err := s.resolveRun(spec.User, spec.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	id, cred, dir := ra.id, ra.cred, ra.dir
	env := proc.BuildEnv(s.env(), spec.Env, id)

	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		s.fail(w, errStopping)
		return
	}
	prev := s.svc
	if prev != nil && !prev.hasEnded() {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, api.CodeExists, "a main command already runs in this sandbox; stop it first (POST "+api.PathMainCmdStop+")")
		return
	}
	svc := &mainCmd{spec: spec, env: env, dir: dir, cred: cred,
		stopCh: make(chan struct{}), ended: make(chan struct{}), changed: make(chan struct{})}
	if prev != nil {
		svc.ring = prev.ring // one log across runs, as docker keeps it
	} else {
		svc.ring = logring.New(spec.LogBytes)
	}
	s.svc = svc
	s.mu.Unlock()

	started := make(chan struct{})
	go s.superviseMainCmd(svc, started)
	<-started
	writeJSON(w, http.StatusOK, svc.status())
}

// makeMainCmdDir creates the directory cwd if it is missing, each new
// component owned by the main command's user (an existing directory is left as
// it is).
func (s *Server) makeMainCmdDir(user, cwd string) error {
	if !filepath.IsAbs(cwd) {
		return badRequest("cwd %q must be absolute to be created", cwd)
	}
	id, err := s.identity(user)
	if err != nil {
		return err
	}
	var missing []string
	for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == "/" {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return badRequest("create working directory %s: %v", missing[i], err)
		}
		if err := os.Lchown(missing[i], int(id.UID), int(id.GID)); err != nil {
			return badRequest("give working directory %s to %d:%d: %v", missing[i], id.UID, id.GID, err)
		}
	}
	return nil
}

// validateMainCmd checks a spec and fills in its defaults.
func validateMainCmd(spec *api.MainCmdSpec) error {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return badRequest("argv is required: the main command and its arguments")
	}
	for _, a := range spec.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return badRequest("argv must not contain NUL bytes")
		}
	}
	switch spec.Restart {
	case "":
		spec.Restart = api.RestartNo
	case api.RestartNo, api.RestartOnFailure, api.RestartAlways:
	default:
		return badRequest("restart %q: use %s, %s or %s", spec.Restart, api.RestartNo, api.RestartOnFailure, api.RestartAlways)
	}
	if spec.MaxRestarts < 0 {
		return badRequest("max_restarts must not be negative")
	}
	switch {
	case spec.LogBytes < 0 || spec.LogBytes > api.MaxMainCmdLogBytes:
		return badRequest("log_bytes must be between 0 and %d", api.MaxMainCmdLogBytes)
	case spec.LogBytes == 0:
		spec.LogBytes = api.DefaultMainCmdLogBytes
	}
	return nil
}

// superviseMainCmd runs svc until it ends for good, restarting it per its
// policy. started is closed once the first run started or failed to.
func (s *Server) superviseMainCmd(svc *mainCmd, started chan struct{}) {
	failures := 0
	for {
		exit, ranFor := s.runMainCmdOnce(svc, started)
		started = nil
		executorStopping := s.isStopping()
		svc.mu.Lock()
		svc.proc = nil
		svc.exits = append(svc.exits, exit)
		if len(svc.exits) > recentExits {
			svc.exits = append(svc.exits[:0], svc.exits[len(svc.exits)-recentExits:]...)
		}
		if executorStopping || !svc.shouldRestart(exit) {
			svc.setState(api.MainCmdExited)
			close(svc.ended)
			svc.mu.Unlock()
			return
		}
		svc.restarts++
		svc.setState(api.MainCmdRestarting)
		svc.mu.Unlock()

		if ranFor >= stableRun {
			failures = 0
		}
		delay := restartBackoffMin << min(failures, 10)
		delay = min(delay, restartBackoffMax)
		failures++
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-svc.stopCh:
			t.Stop()
			svc.mu.Lock()
			svc.setState(api.MainCmdExited)
			close(svc.ended)
			svc.mu.Unlock()
			return
		}
	}
}

// shouldRestart applies the restart policy to a run's end. Called with mu
// held.
func (svc *mainCmd) shouldRestart(exit api.MainCmdExit) bool {
	if svc.stopping {
		return false
	}
	if svc.spec.MaxRestarts > 0 && svc.restarts >= svc.spec.MaxRestarts {
		return false
	}
	switch svc.spec.Restart {
	case api.RestartAlways:
		return true
	case api.RestartOnFailure:
		return exit.ExitCode != 0
	}
	return false
}

// setState changes the state and wakes the waiters. Called with mu held.
func (svc *mainCmd) setState(state string) {
	svc.state = state
	close(svc.changed)
	svc.changed = make(chan struct{})
}

// runMainCmdOnce starts the main command's command, feeds its output to the
// ring and returns how it ended and how long it ran.
func (s *Server) runMainCmdOnce(svc *mainCmd, started chan struct{}) (api.MainCmdExit, time.Duration) {
	begin := time.Now()
	fail := func(code int, err error) (api.MainCmdExit, time.Duration) {
		svc.ring.Write(api.LogStderr, []byte(fmt.Sprintf("sbx: start main command %s: %v\n", svc.spec.Argv[0], err)))
		svc.mu.Lock()
		svc.started = begin
		svc.mu.Unlock()
		if started != nil {
			close(started)
		}
		return api.MainCmdExit{ExitCode: code, Error: err.Error(), StartedAt: begin, FinishedAt: time.Now()}, 0
	}
	// Its own session: no terminal, and signals reach its whole group.
	cmd := proc.Command{Argv: svc.spec.Argv, Dir: svc.dir, Env: svc.env, Cred: svc.cred, Group: proc.OwnSession}
	cmd.Stdio[0] = s.devNull
	var outputs []*os.File
	for i := 1; i <= 2; i++ {
		r, w, err := proc.OutputPipe()
		if err != nil {
			closeFiles(cmd.Close, outputs...)
			return fail(126, err)
		}
		cmd.Stdio[i] = w
		cmd.Close = append(cmd.Close, w)
		outputs = append(outputs, r)
	}
	streams := []string{api.LogStdout, api.LogStderr}
	out := proc.Output{Files: outputs, WholeRunes: true, Sink: func(stream int, b []byte) error {
		svc.ring.Write(streams[stream], b)
		return nil
	}}
	r, err := s.sup.Run(cmd, out, proc.Limits{}, func(p *proc.Process) {
		svc.mu.Lock()
		svc.proc, svc.started = p, begin
		svc.setState(api.MainCmdRunning)
		svc.mu.Unlock()
		if started != nil {
			close(started)
		}
	})
	if err != nil {
		return fail(startCode(err), err)
	}
	end := time.Now()
	return api.MainCmdExit{ExitCode: r.ExitCode, Signal: r.Signal, StartedAt: begin, FinishedAt: end}, end.Sub(begin)
}

// hasEnded reports whether the main command ended for good.
func (svc *mainCmd) hasEnded() bool {
	select {
	case <-svc.ended:
		return true
	default:
		return false
	}
}

// status reports the main command.
func (svc *mainCmd) status() api.MainCmdStatus {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	st := api.MainCmdStatus{
		State:    svc.state,
		Argv:     svc.spec.Argv,
		Restart:  svc.spec.Restart,
		Restarts: svc.restarts,
		LogEnd:   svc.ring.End(),
	}
	st.StartedAt = svc.started
	if svc.proc != nil && svc.state == api.MainCmdRunning {
		st.Pid = svc.proc.Pid
	}
	if n := len(svc.exits); n > 0 {
		last := svc.exits[n-1]
		st.Exit = &last
		st.RecentExits = append([]api.MainCmdExit(nil), svc.exits...)
	}
	return st
}

// requestStop ends restarts and returns the running process, if any.
func (svc *mainCmd) requestStop() *proc.Process {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if !svc.stopping {
		svc.stopping = true
		close(svc.stopCh)
	}
	return svc.proc
}

// currentMainCmd returns the main command, or writes 404.
func (s *Server) currentMainCmd(w http.ResponseWriter) *mainCmd {
	s.mu.Lock()
	svc := s.svc
	s.mu.Unlock()
	if svc == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no main command was started in this sandbox (POST "+api.PathMainCmd+")")
	}
	return svc
}

// getMainCmd handles GET /v1/maincmd.
func (s *Server) getMainCmd(w http.ResponseWriter, r *http.Request) {
	if svc := s.currentMainCmd(w); svc != nil {
		writeJSON(w, http.StatusOK, svc.status())
	}
}

// waitMainCmd handles POST /v1/maincmd/wait.
func (s *Server) waitMainCmd(w http.ResponseWriter, r *http.Request) {
	svc := s.currentMainCmd(w)
	if svc == nil {
		return
	}
	select {
	case <-svc.ended:
		writeJSON(w, http.StatusOK, svc.status())
	case <-r.Context().Done():
	}
}

// signalMainCmd handles POST /v1/maincmd/signal.
func (s *Server) signalMainCmd(w http.ResponseWriter, r *http.Request) {
	var req api.MainCmdSignal
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		s.fail(w, err)
		return
	}
	svc := s.currentMainCmd(w)
	if svc == nil {
		return
	}
	svc.mu.Lock()
	p := svc.proc
	svc.mu.Unlock()
	if p == nil || p.Exited() {
		writeError(w, http.StatusConflict, api.CodeNotRunning, "the main command is not running")
		return
	}
	_ = p.SignalGroup(sig)
	writeJSON(w, http.StatusOK, svc.status())
}

// stopMainCmd handles POST /v1/maincmd/stop.
func (s *Server) stopMainCmd(w http.ResponseWriter, r *http.Request) {
	var req api.MainCmdStop
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	if req.TimeoutS < 0 {
		s.fail(w, badRequest("timeout_s must not be negative"))
		return
	}
	grace := defaultStopGrace
	if req.TimeoutS > 0 {
		grace = proc.Seconds(req.TimeoutS)
	}
	svc := s.currentMainCmd(w)
	if svc == nil {
		return
	}
	sig := unix.SIGTERM
	if req.Signal != "" {
		var err error
		if sig, err = parseSignal(req.Signal); err != nil {
			s.fail(w, err)
			return
		}
	}
	svc.stop(r.Context(), sig, grace)
	writeJSON(w, http.StatusOK, svc.status())
}

// stop ends the main command for good: sig to its group, SIGKILL after grace,
// and no restart.
func (svc *mainCmd) stop(ctx context.Context, sig unix.Signal, grace time.Duration) {
	p := svc.requestStop()
	if p != nil {
		_ = p.SignalGroup(sig)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-svc.ended:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	if p != nil {
		_ = p.SignalGroup(unix.SIGKILL)
	}
	// The group is dead; the pumps give up after pipeDrain.
	select {
	case <-svc.ended:
	case <-time.After(2 * time.Second):
	}
}

// parseSignal accepts "SIGTERM", "TERM" or "15".
func parseSignal(s string) (unix.Signal, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return 0, badRequest("signal %d is out of range", n)
		}
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, badRequest("unknown signal %q: use a name such as SIGTERM or a number", s)
}

// mainCmdLogs handles GET /v1/maincmd/logs.
func (s *Server) mainCmdLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since int64
	var tail int64 = -1
	for name, dst := range map[string]*int64{"since": &since, "tail_bytes": &tail} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.fail(w, badRequest("%s must be a non-negative integer", name))
				return
			}
			*dst = n
		}
	}
	follow := q.Get("follow") == "1" || q.Get("follow") == "true"
	svc := s.currentMainCmd(w)
	if svc == nil {
		return
	}
	off := since
	if tail >= 0 {
		off = svc.ring.TailOffset(tail)
	}
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(f api.LogFrame) bool { return enc.Encode(f) == nil }
	ended := false
	for {
		changed := svc.ring.Changed()
		chunks, next, lost := svc.ring.Read(off, logReadChunk)
		if lost > 0 && !send(api.LogFrame{Type: api.LogGap, Offset: off, Lost: lost}) {
			return
		}
		for _, c := range chunks {
			if !send(api.LogFrame{Type: c.Stream, Offset: c.Offset, Data: string(c.Data), Time: c.Time}) {
				return
			}
		}
		off = next
		if len(chunks) > 0 {
			continue
		}
		if !follow || ended {
			break
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-changed:
		case <-svc.ended:
			ended = true // read what is left, then end
		case <-r.Context().Done():
			return
		}
	}
	st := svc.status()
	send(api.LogFrame{Type: api.LogEnd, Offset: off, MainCmd: &st})
}
