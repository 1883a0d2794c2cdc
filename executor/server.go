// Package executor is sbx's agent inside a sandbox: `sbx executor`, PID 1 of
// every long-lived sandbox. It serves HTTP/1.1 with JSON on a unix socket and
// runs commands, persistent shell sessions (on a pseudo-terminal) and file
// operations inside the sandbox, as the sandbox's configured user and
// environment. It reaps every orphan, and its memory stays bounded whatever
// the commands print. The wire types are in executor/api, the host-side
// client in executor/client.
package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/outbuf"
	"github.com/sbxrun/sbx/executor/internal/proc"
	"github.com/sbxrun/sbx/executor/internal/shell"
	"github.com/sbxrun/sbx/internal/version"
)

// Config is how the executor runs commands. The host passes the image's
// config (user, environment, working directory) through it.
type Config struct {
	// User is the default user: "name", "uid" or "uid:gid" (empty: the
	// executor's own).
	User string
	// Env is the default environment, "K=V" entries.
	Env []string
	// Workdir is the default working directory (empty: "/").
	Workdir string
	// ScratchDir holds the sessions' command files (empty: a new directory
	// under the first writable of /tmp, /dev/shm, /run, /var/tmp), made by
	// the first shell session.
	ScratchDir string
	// StopTimeout is the grace between SIGTERM and SIGKILL at shutdown
	// (default 5 s).
	StopTimeout time.Duration
	// MaxSessions and MaxExecs bound concurrent sessions and commands
	// (defaults 64 and 64).
	MaxSessions, MaxExecs int
	// OutputBudget bounds the output held for all running commands and
	// sessions together, in bytes (default DefaultOutputBudget); past it,
	// further output is dropped and the reply says so.
	OutputBudget int64
	// Logger receives the executor's logs (default slog.Default()).
	Logger *slog.Logger
	// ClaimDefaults, if not nil, is an empty file (a warm pool member's)
	// into which the host writes the defaults of the sandbox that claims
	// the member, as JSON api.Defaults: they replace User, Env and Workdir
	// before the next request is served. The server owns it, and marks
	// its descriptor close-on-exec (one inherited from the host is not):
	// no command the executor starts holds it.
	ClaimDefaults *os.File
}

// Server is the executor's HTTP API.
type Server struct {
	cfg         Config
	sup         *proc.Supervisor
	log         *slog.Logger
	started     time.Time
	execs       chan struct{}
	scratchMu   sync.Mutex // guards the three below
	scratch     string     // made on the first session (sessionScratch)
	ownsScratch bool
	scratchGone bool     // removed at shutdown: no session makes it again
	devNull     *os.File // stdin of commands without input
	outBudget   *outbuf.Budget
	defaults    atomic.Pointer[defaults]
	// claimDefaults is Config.ClaimDefaults until it is applied; claimMu
	// serialises its reading.
	claimDefaults atomic.Pointer[os.File]
	claimMu       sync.Mutex

	serving atomic.Pointer[serving] // set by Serve

	mu       sync.Mutex
	sessions map[string]*shell.Session
	svc      *mainCmd // the sandbox's main command, once started
	stopping bool
}

// DefaultOutputBudget is the default Config.OutputBudget: the output held
// for all commands and sessions together.
const DefaultOutputBudget = 64 << 20

// maxJSONBody caps JSON request bodies (an edit's file_text is at most
// 10 MiB).
const maxJSONBody = 16 << 20

// New checks cfg and starts reaping children. Close releases it.
func New(cfg Config) (*Server, error) {
	if cfg.Workdir == "" {
		cfg.Workdir = "/"
	}
	if !filepath.IsAbs(cfg.Workdir) {
		return nil, fmt.Errorf("working directory %q must be absolute", cfg.Workdir)
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.MaxExecs <= 0 {
		cfg.MaxExecs = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OutputBudget <= 0 {
		cfg.OutputBudget = DefaultOutputBudget
	}
	user := proc.Current()
	if cfg.User != "" {
		u, err := proc.LookupUser(cfg.User)
		if err != nil {
			return nil, fmt.Errorf("default user: %w", err)
		}
		if _, err := u.Credential(); err != nil {
			return nil, fmt.Errorf("default user: %w", err)
		}
		user = u
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		started:   time.Now(),
		execs:     make(chan struct{}, cfg.MaxExecs),
		sessions:  make(map[string]*shell.Session),
		outBudget: outbuf.NewBudget(cfg.OutputBudget),
	}
	s.setDefaults(cfg.Env, cfg.Workdir, user, cfg.User)
	if cfg.ClaimDefaults != nil {
		if err := closeOnExec(cfg.ClaimDefaults); err != nil {
			return nil, fmt.Errorf("the claim defaults file: %w", err)
		}
		s.claimDefaults.Store(cfg.ClaimDefaults)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	s.devNull = devNull
	sup, err := proc.NewSupervisor()
	if err != nil {
		devNull.Close()
		return nil, err
	}
	s.sup = sup
	return s, nil
}

// sessionScratch returns the directory that holds the sessions' command
// files, made on the first call: a sandbox that runs no shell session
// never writes it, and the executor answers its first request without the
// mkdir (which copies /tmp up into the writable layer). A failure is
// returned to that session and tried again by the next.
func (s *Server) sessionScratch() (string, error) {
	s.scratchMu.Lock()
	defer s.scratchMu.Unlock()
	if s.scratchGone {
		return "", errStopping
	}
	if s.scratch == "" {
		if err := s.makeScratch(); err != nil {
			return "", err
		}
	}
	return s.scratch, nil
}

// makeScratch makes the scratch directory; the caller holds scratchMu.
func (s *Server) makeScratch() error {
	if s.cfg.ScratchDir != "" {
		if err := os.MkdirAll(s.cfg.ScratchDir, 0o711); err != nil {
			return fmt.Errorf("scratch directory: %w", err)
		}
		s.scratch = s.cfg.ScratchDir
		return nil
	}
	var errs []error
	for _, base := range []string{os.TempDir(), "/dev/shm", "/run", "/var/tmp"} {
		dir, err := os.MkdirTemp(base, ".sbx-executor-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := chmodDir(dir, 0o711); err != nil {
			os.Remove(dir)
			errs = append(errs, err)
			continue
		}
		s.scratch, s.ownsScratch = dir, true
		return nil
	}
	return fmt.Errorf("no writable scratch directory for shell sessions (set --scratch-dir): %w", errors.Join(errs...))
}

// chmodDir sets the mode of the directory dir itself, never of what a
// symlink put in its place (by sandboxed code, once commands run) points to.
func chmodDir(dir string, mode os.FileMode) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

func (s *Server) removeScratch() {
	s.scratchMu.Lock()
	defer s.scratchMu.Unlock()
	s.scratchGone = true
	if s.ownsScratch {
		os.RemoveAll(s.scratch)
	}
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathHealth, s.health)
	mux.HandleFunc("GET "+api.PathInfo, s.info)
	mux.HandleFunc("POST "+api.PathExec, s.exec)
	mux.HandleFunc("POST "+api.PathExecAttach, s.attach)
	mux.HandleFunc("POST "+api.PathSessions, s.createSession)
	mux.HandleFunc("GET "+api.PathSessions, s.listSessions)
	mux.HandleFunc("DELETE "+api.PathSessions+"/{id}", s.deleteSession)
	mux.HandleFunc("POST "+api.PathSessions+"/{id}/run", s.runSession)
	mux.HandleFunc("GET "+api.PathFiles, s.readFile)
	mux.HandleFunc("PUT "+api.PathFiles, s.writeFile)
	mux.HandleFunc("POST "+api.PathFilesEdit, s.editFile)
	mux.HandleFunc("GET "+api.PathFsList, s.listDir)
	mux.HandleFunc("POST "+api.PathMainCmd, s.startMainCmd)
	mux.HandleFunc("GET "+api.PathMainCmd, s.getMainCmd)
	mux.HandleFunc("GET "+api.PathMainCmdLogs, s.mainCmdLogs)
	mux.HandleFunc("POST "+api.PathMainCmdWait, s.waitMainCmd)
	mux.HandleFunc("POST "+api.PathMainCmdSignal, s.signalMainCmd)
	mux.HandleFunc("POST "+api.PathMainCmdStop, s.stopMainCmd)
	mux.HandleFunc("GET "+api.PathFsArchive, s.getArchive)
	mux.HandleFunc("PUT "+api.PathFsArchive, s.putArchive)
	mux.HandleFunc("POST "+api.PathCheckpointPrepare, s.checkpointPrepare)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allowed := allowedMethods(mux, r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
			return
		}
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.applyClaimDefaults(); err != nil {
			s.fail(w, err)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// allowedMethods lists the methods with an endpoint at r's path (the
// catch-all route aside).
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// Serve answers requests on ln until ctx ends, then shuts down: it stops
// every command (SIGTERM, then SIGKILL after StopTimeout), closes the
// sessions and returns. As PID 1 it signals every process of the sandbox.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	conns := newConnTracker()
	srv.ConnState, srv.ConnContext = conns.hook, conns.context
	rl := newRelistener(ln)
	s.serving.Store(&serving{rl: rl, srv: srv, conns: conns})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(rl) }()
	select {
	case err := <-errc:
		s.shutdown()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("executor: shutting down")
	s.shutdown()
	_ = srv.Close()
	<-errc
	return nil
}

// shutdown stops every process and session and releases the supervisor.
func (s *Server) shutdown() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	sessions := make([]*shell.Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	svc := s.svc
	s.mu.Unlock()
	if svc != nil {
		svc.requestStop() // no restart: everything is about to be signalled
	}

	s.signalAll(unix.SIGTERM, sessions)
	deadline := time.Now().Add(s.cfg.StopTimeout)
	for time.Now().Before(deadline) && s.childrenLeft() {
		time.Sleep(20 * time.Millisecond)
	}
	s.signalAll(unix.SIGKILL, sessions)
	for _, ss := range sessions {
		ss.Close()
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && s.childrenLeft(); {
		time.Sleep(10 * time.Millisecond)
	}
	s.sup.Close()
	s.removeScratch()
}

// signalAll sends sig to everything the executor started. As PID 1 of a
// sandbox that is every other process (kill -1); as a plain process it is
// the process groups of its commands and the sessions of its shells.
func (s *Server) signalAll(sig unix.Signal, sessions []*shell.Session) {
	// Interactive shells ignore SIGTERM; a hangup ends them, as when a
	// terminal closes.
	for _, ss := range sessions {
		if sig == unix.SIGTERM {
			ss.Signal(unix.SIGHUP)
		}
		ss.Signal(sig)
	}
	if os.Getpid() == 1 {
		_ = unix.Kill(-1, sig)
		return
	}
	for _, pid := range s.sup.Running() {
		_ = unix.Kill(-pid, sig)
	}
}

// childrenLeft reports whether any child of the executor is alive.
func (s *Server) childrenLeft() bool {
	return len(s.sup.Running()) > 0 || proc.HasChildren()
}

// Close stops everything without serving (for callers of Handler).
func (s *Server) Close() { s.shutdown() }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: version.Version, UptimeS: time.Since(s.started).Seconds()})
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// closeOnExec marks f's descriptor close-on-exec.
func closeOnExec(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { _, ferr = unix.FcntlInt(fd, unix.F_SETFD, unix.FD_CLOEXEC) }); err != nil {
		return err
	}
	return ferr
}
