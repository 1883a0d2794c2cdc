package openhands

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/server/portproxy"
)

// Backend is what the Runtime API needs of sbx: a subset of sbx.Sandboxes
// and sbx.Images, which *sandbox.Host and server/client implement.
type Backend interface {
	Create(ctx context.Context, opts sbx.Options) (*sbx.Sandbox, error)
	Get(ctx context.Context, ref string) (*sbx.Sandbox, error)
	Pause(ctx context.Context, ref string) (*sbx.Sandbox, error)
	Resume(ctx context.Context, ref string) (*sbx.Sandbox, error)
	Remove(ctx context.Context, ref string, o sbx.RemoveOptions) error
	// Dial reaches the sandbox's executor (the Agent Server runs as its
	// supervised service).
	Dial(ctx context.Context, ref string) (net.Conn, error)
	// DialPort reaches a TCP port on the sandbox's loopback.
	DialPort(ctx context.Context, ref string, port int) (net.Conn, error)
	PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error)
	InspectImage(ctx context.Context, ref string) (*sbx.Image, error)
}

// Alias maps images matching Pattern ("*" matches anything) to Image, for
// hosts that reach no registry: "ghcr.io/openhands/agent-server:*" →
// "openhands-agent:local".
type Alias struct {
	Pattern string
	Image   string
}

// Config is how the Runtime API runs sandboxes.
type Config struct {
	// APIKey is what clients send in X-API-Key. Required.
	APIKey string
	// APIKeys are further keys, one per app server or tenant: each key
	// sees only the runtimes started with it (tenants.go).
	APIKeys []string
	// ServerTokens are credentials of sbx itself (the REST server's bearer
	// token) that the data plane strips from requests it forwards into a
	// sandbox, beside the API keys.
	ServerTokens []string
	// PublicURL is this listener's base URL as clients reach it
	// ("http://sbx-host:8700"); runtime URLs are PublicURL/<runtime_id>
	// (path mode) unless ListenRuntime is set.
	PublicURL string
	// ListenRuntime, when set, gives every runtime a listener of its own
	// (port mode) and returns the base URL clients reach it at; port is
	// the one the runtime had before a restart of the server, or 0 for
	// any. Port mode is for the SDK's APIRemoteWorkspace, which cannot use
	// a URL with a path (httpx's base URL gains a slash and its check
	// fails); path mode suits the app server, whose VS Code and worker URLs
	// need it.
	ListenRuntime func(port int) (net.Listener, string, error)
	// StateDir keeps the runtime records (0700), so that a restarted
	// server knows its runtimes.
	StateDir string
	// Aliases map image names before they are pulled or looked up.
	Aliases []Alias
	// AgentTree is a host directory holding a self-contained Agent Server
	// tree (see tests/openhands/build-image.sh), mounted read-only at
	// /agent-server in images that match TreeImages, so the Agent Server
	// runs in any image; the clients' commands are rewritten to its python.
	AgentTree  string
	TreeImages []string
	// BaseLimits are a runtime's limits at resource_factor 1; a factor
	// multiplies them.
	BaseLimits sbx.Limits
	// Network and Egress of the sandboxes (default bridge with the default
	// egress: the internet for the LLM, no private ranges).
	Network, Egress string
	// ReadyTimeout bounds a start, pull included (default 10 min).
	ReadyTimeout time.Duration
	// TombstoneTTL is how long a stopped runtime is still reported (as
	// stopped) before it is forgotten (default 10 min).
	TombstoneTTL time.Duration
	// Environment is added to every runtime's environment (the request's
	// own variables win); the session key variables are always sbx's.
	Environment map[string]string
	// RotateKeyOnResume gives a resumed runtime a new session key (the
	// Agent Server restarts with it); by default the key is kept.
	RotateKeyOnResume bool
	// Warm keeps Agent Servers booted ahead (dormant), for starts that
	// are running at once, in WarmPools (required when Warm asks for
	// any; the front-end passes its local host).
	Warm      WarmConfig
	WarmPools WarmPools
	// LogTailBytes is how much of the Agent Server's output pod_logs
	// carries (default 64 KiB).
	LogTailBytes int64
	// Logger receives the API's logs (default slog.Default()).
	Logger *slog.Logger
}

// Service is the Runtime API over a Backend.
type Service struct {
	cfg   Config
	be    Backend
	log   *slog.Logger
	proxy *portproxy.Proxy
	ctx   context.Context // ends background starts at Close
	stop  context.CancelFunc
	wg    sync.WaitGroup
	warm  *warm // nil without warm Agent Servers

	tenants []tenant // the API keys; the first owns records without an owner

	mu       sync.Mutex
	byID     map[string]*runtime
	bySess   map[string]*runtime
	sessLock map[string]*sync.Mutex
}

// runtime is one runtime's record, kept on disk as JSON.
type runtime struct {
	RuntimeID string    `json:"runtime_id"`
	SessionID string    `json:"session_id"`
	SandboxID string    `json:"sandbox_id,omitempty"`
	Key       string    `json:"session_api_key"`
	Image     string    `json:"image"`
	Status    string    `json:"status"`
	PodStatus string    `json:"pod_status"`
	Detail    string    `json:"status_detail,omitempty"`
	Restarts  int       `json:"restart_count,omitempty"`
	Reasons   []string  `json:"restart_reasons,omitempty"`
	Logs      string    `json:"pod_logs,omitempty"`
	Created   time.Time `json:"created"`
	Ended     time.Time `json:"ended,omitzero"`
	Service   execapi.MainCmdSpec
	// URL and Port are the runtime's own listener in port mode.
	URL  string `json:"url,omitempty"`
	Port int    `json:"port,omitempty"`
	// Owner is the tenant of the key that started it (tenants.go).
	Owner string `json:"owner,omitempty"`

	exec        *execclient.Client
	server      *http.Server       // the runtime's listener in port mode
	cancelStart context.CancelFunc // ends a start in progress
	cancelWatch context.CancelFunc // ends the watch of a running runtime
}

// New starts the Runtime API and takes up the runtimes recorded in
// cfg.StateDir.
func New(be Backend, cfg Config) (*Service, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("openhands: an API key is required (clients send it as X-API-Key)")
	}
	if cfg.PublicURL == "" {
		return nil, errors.New("openhands: the public URL is required (the base URL clients reach the runtimes at)")
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.StateDir == "" {
		return nil, errors.New("openhands: a state directory is required")
	}
	if (cfg.Warm.Size > 0 || len(cfg.Warm.Shapes) > 0) && cfg.WarmPools == nil {
		return nil, errors.New("openhands: warm Agent Servers need the local host's pools (Config.WarmPools; sbx serve supplies them)")
	}
	if cfg.Network == "" {
		cfg.Network = "bridge"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Minute
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = 10 * time.Minute
	}
	if cfg.LogTailBytes <= 0 {
		cfg.LogTailBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AgentTree != "" {
		if _, err := os.Lstat(filepath.Join(cfg.AgentTree, ".venv", "bin", "python")); err != nil {
			return nil, fmt.Errorf("openhands: agent tree %s has no .venv/bin/python: build one with tests/openhands/build-image.sh", cfg.AgentTree)
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("openhands: state directory: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, be: be, log: cfg.Logger, ctx: ctx, stop: stop, tenants: tenantsOf(append([]string{cfg.APIKey}, cfg.APIKeys...)),
		byID: map[string]*runtime{}, bySess: map[string]*runtime{}, sessLock: map[string]*sync.Mutex{}}
	s.proxy = portproxy.New(be.DialPort, portproxy.Options{
		Logger: cfg.Logger,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "the runtime did not answer: "+err.Error())
		},
	})
	if err := s.load(); err != nil {
		stop()
		return nil, err
	}
	w, err := s.newWarm()
	if err != nil {
		stop()
		return nil, err
	}
	if s.warm = w; w != nil {
		s.background(s.keepWarm)
	}
	return s, nil
}

// Close ends background starts, runtime listeners and proxied
// connections.
func (s *Service) Close() {
	s.stop()
	s.mu.Lock()
	for _, rt := range s.byID {
		if rt.server != nil {
			_ = rt.server.Close()
		}
	}
	s.mu.Unlock()
	s.proxy.Close()
	s.wg.Wait()
}

// load reads the runtime records and reconciles them with the sandboxes.
func (s *Service) load() error {
	ents, err := os.ReadDir(s.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("openhands: read state: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.cfg.StateDir, e.Name()))
		if err != nil {
			return fmt.Errorf("openhands: read state: %w", err)
		}
		rt := &runtime{}
		if err := json.Unmarshal(data, rt); err != nil || rt.RuntimeID == "" {
			s.log.Warn("openhands: skipping a bad runtime record", "file", e.Name(), "err", err)
			continue
		}
		if rt.Owner == "" {
			rt.Owner = s.tenants[0].id
		}
		s.byID[rt.RuntimeID] = rt
		if cur := s.bySess[rt.SessionID]; cur == nil || cur.Created.Before(rt.Created) {
			s.bySess[rt.SessionID] = rt
		}
		if rt.Status != StatusStopped && rt.Port != 0 {
			if err := s.listenRuntime(rt); err != nil {
				s.log.Warn("openhands: runtime's listener", "runtime", rt.RuntimeID, "err", err)
			}
		}
		switch rt.Status {
		case StatusStarting:
			// The server stopped during the start: start over from the
			// sandbox if it was made, else fail the runtime.
			if rt.SandboxID == "" {
				rt.fail(PodFailed, "sbx serve restarted before the sandbox was created; start the runtime again", "")
				s.save(rt)
				continue
			}
			s.launch(rt, func(ctx context.Context) { s.awaitReady(ctx, rt) })
		case StatusRunning, StatusPaused:
			if rt.SandboxID != "" {
				rt.exec = s.executor(rt.SandboxID)
				s.watch(rt)
			}
		}
	}
	return nil
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// save writes rt's record (0600). Called with s.mu held or before rt is
// shared.
func (s *Service) save(rt *runtime) {
	data, err := json.Marshal(rt)
	if err == nil {
		path := filepath.Join(s.cfg.StateDir, rt.RuntimeID+".json")
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		s.log.Warn("openhands: could not save a runtime record", "runtime", rt.RuntimeID, "err", err)
	}
}

// forget drops rt's record. Called with s.mu held.
func (s *Service) forget(rt *runtime) {
	delete(s.byID, rt.RuntimeID)
	if s.bySess[rt.SessionID] == rt {
		delete(s.bySess, rt.SessionID)
	}
	_ = os.Remove(filepath.Join(s.cfg.StateDir, rt.RuntimeID+".json"))
}

// fail marks rt failed. Called with s.mu held (or before rt is shared).
func (rt *runtime) fail(pod, detail, logs string) {
	rt.Status, rt.PodStatus, rt.Detail = StatusError, pod, detail
	if logs != "" {
		rt.Logs = logs
	}
}

// object renders rt for clients. Called with s.mu held.
func (s *Service) object(rt *runtime) Runtime {
	reasons := rt.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	return Runtime{
		RuntimeID: rt.RuntimeID, SessionID: rt.SessionID, URL: s.runtimeURL(rt),
		SessionAPIKey: rt.Key, Status: rt.Status, PodStatus: rt.PodStatus, StatusDetail: rt.Detail,
		RestartCount: rt.Restarts, RestartReasons: reasons, PodLogs: rt.Logs, Image: rt.Image, SandboxID: rt.SandboxID,
	}
}

// runtimeURL is the Agent Server's base URL as clients reach it.
func (s *Service) runtimeURL(rt *runtime) string {
	if rt.URL != "" {
		return rt.URL
	}
	return s.cfg.PublicURL + "/" + rt.RuntimeID
}

// listenRuntime opens rt's own listener in port mode: everything on it
// goes to the Agent Server. Called with s.mu held.
func (s *Service) listenRuntime(rt *runtime) error {
	if s.cfg.ListenRuntime == nil {
		return nil
	}
	ln, url, err := s.cfg.ListenRuntime(rt.Port)
	if err != nil {
		return fmt.Errorf("openhands: a listener for runtime %s: %w", rt.RuntimeID, err)
	}
	rt.URL, rt.Port = strings.TrimRight(url, "/"), ln.Addr().(*net.TCPAddr).Port
	id := rt.RuntimeID
	rt.server = &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.forward(w, r, id, r.URL.EscapedPath())
	})}
	go func() { _ = rt.server.Serve(ln) }()
	return nil
}

// sessionLock serializes starts of one session.
func (s *Service) sessionLock(session string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.sessLock[session]
	if l == nil {
		l = &sync.Mutex{}
		s.sessLock[session] = l
	}
	return l
}

// executor returns a client of the sandbox's executor.
func (s *Service) executor(sandboxID string) *execclient.Client {
	return execclient.NewWithDialer(func(ctx context.Context) (net.Conn, error) {
		return s.be.Dial(ctx, sandboxID)
	}, execclient.Options{Timeout: 10 * time.Second})
}

// launch runs a start of rt in the background until it returns, rt is
// stopped or the service closes.
func (s *Service) launch(rt *runtime, fn func(ctx context.Context)) {
	rt.cancelStart = s.background(fn)
}

// launchWatch runs a watch of rt in the background.
func (s *Service) launchWatch(rt *runtime, fn func(ctx context.Context)) {
	cancel := s.background(fn)
	s.mu.Lock()
	if rt.cancelWatch != nil {
		rt.cancelWatch()
	}
	rt.cancelWatch = cancel
	s.mu.Unlock()
}

// background runs fn until it returns or the service closes.
func (s *Service) background(fn func(ctx context.Context)) context.CancelFunc {
	ctx, cancel := context.WithCancel(s.ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		fn(ctx)
	}()
	return cancel
}

// Start handles POST /start: it records a new runtime and returns it as
// starting at once; the pull, the sandbox and the Agent Server come up in
// the background. A session that has a starting, running or paused
// runtime gets that runtime back (the app server never retries a POST;
// the SDK calls it again for a session in a bad state, which then starts
// over).
func (s *Service) Start(req StartRequest) (Runtime, error) {
	if req.SessionID == "" {
		return Runtime{}, badRequest("session_id is required")
	}
	if req.Image == "" {
		return Runtime{}, badRequest("image is required")
	}
	if req.ResourceFactor != 0 && (req.ResourceFactor < 0 || req.ResourceFactor > 64) {
		return Runtime{}, badRequest("resource_factor must be between 0 and 64")
	}
	switch req.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		return Runtime{}, badRequest("image_pull_policy must be Always, IfNotPresent or Never")
	}
	if req.WorkingDir != "" && !strings.HasPrefix(req.WorkingDir, "/") {
		return Runtime{}, badRequest("working_dir must be an absolute path")
	}
	for k := range req.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Runtime{}, badRequest(fmt.Sprintf("environment variable name %q is not valid", k))
		}
	}
	l := s.sessionLock(req.SessionID)
	l.Lock()
	defer l.Unlock()

	s.mu.Lock()
	s.expireLocked()
	if req.owner == "" {
		req.owner = s.tenants[0].id // a call from within the process
	}
	if old := s.bySess[req.SessionID]; old != nil {
		if old.Owner != req.owner {
			s.mu.Unlock()
			return Runtime{}, conflict("session " + req.SessionID + " belongs to another API key; use another session id")
		}
		switch old.Status {
		case StatusStarting, StatusRunning, StatusPaused:
			obj := s.object(old)
			s.mu.Unlock()
			return obj, nil
		}
		// An ended or failed runtime of the session: start over; the old
		// one's sandbox goes.
		if old.Status == StatusError && old.SandboxID != "" {
			s.retire(old, "replaced by a new start of the session")
		}
	}
	s.mu.Unlock()
	rt := &runtime{
		RuntimeID: "rt-" + newID(12), SessionID: req.SessionID, Key: newID(32), Image: req.Image,
		Status: StatusStarting, PodStatus: PodPending, Created: time.Now().UTC(), Owner: req.owner,
	}
	// A warm Agent Server, when one of the request's shape is ready: the
	// runtime is running before the reply.
	if err := s.claimWarm(rt, req); err != nil && s.warm != nil {
		s.log.Debug("openhands: cold start", "session", req.SessionID, "why", err)
	}
	return s.register(rt, req)
}

// register records a new runtime and, unless it is running already (a
// warm Agent Server), brings it up in the background.
func (s *Service) register(rt *runtime, req StartRequest) (Runtime, error) {
	s.mu.Lock()
	if err := s.listenRuntime(rt); err != nil {
		s.mu.Unlock()
		if rt.SandboxID != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = s.be.Remove(ctx, rt.SandboxID, sbx.RemoveOptions{Force: true})
		}
		return Runtime{}, err
	}
	s.byID[rt.RuntimeID] = rt
	s.bySess[rt.SessionID] = rt
	s.save(rt)
	obj := s.object(rt)
	running := rt.Status == StatusRunning
	if !running {
		s.launch(rt, func(ctx context.Context) { s.bringUp(ctx, rt, req) })
	}
	s.mu.Unlock()
	if running {
		s.watch(rt)
	}
	return obj, nil
}

// retire stops rt's sandbox in the background and keeps rt as a
// tombstone. Called with s.mu held.
func (s *Service) retire(rt *runtime, why string) {
	for _, cancel := range []context.CancelFunc{rt.cancelStart, rt.cancelWatch} {
		if cancel != nil {
			cancel()
		}
	}
	id := rt.SandboxID
	rt.Status, rt.PodStatus, rt.Ended = StatusStopped, PodNotFound, time.Now().UTC()
	if rt.Detail == "" {
		rt.Detail = why
	}
	if rt.server != nil {
		_ = rt.server.Close()
		rt.server = nil
	}
	s.save(rt)
	if id == "" {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.be.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil && !errors.Is(err, sbx.ErrNotFound) {
			s.log.Warn("openhands: remove sandbox", "runtime", rt.RuntimeID, "sandbox", id, "err", err)
		}
		s.proxy.CloseIdle()
	}()
}

// bringUp resolves and pulls the image, creates the sandbox, starts the
// Agent Server as its service and waits until it answers.
func (s *Service) bringUp(ctx context.Context, rt *runtime, req StartRequest) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	image, tree := s.resolveImage(req.Image)
	img, err := s.ensureImage(ctx, image, req.ImagePullPolicy)
	if err != nil {
		s.update(rt, func() { rt.fail(PodFailed, err.Error(), "") })
		return
	}
	opts, spec, err := s.sandboxOptions(rt, req, img, tree)
	if e := s.warm.egressOf(s, req); e != "" {
		opts.Egress = e
	}
	if err != nil {
		s.update(rt, func() { rt.fail(PodFailed, "CreateContainerConfigError: "+err.Error(), "") })
		return
	}
	sb, err := s.be.Create(ctx, opts)
	if err != nil {
		detail := "CreateContainerError: " + err.Error()
		if errors.Is(err, sbx.ErrLimit) {
			what := "pods"
			if strings.Contains(err.Error(), "memory") {
				what = "memory"
			}
			detail = "Insufficient " + what + ": " + err.Error()
		}
		s.update(rt, func() { rt.fail(PodFailed, detail, "") })
		return
	}
	ex := s.executor(sb.ID)
	s.update(rt, func() { rt.SandboxID, rt.exec, rt.Service = sb.ID, ex, spec })
	if ctx.Err() != nil { // stopped meanwhile
		return
	}
	if _, err := ex.StartMainCmd(ctx, spec); err != nil {
		s.update(rt, func() { rt.fail(PodFailed, "CreateContainerError: start the command: "+err.Error(), "") })
		return
	}
	s.awaitReady(ctx, rt)
	s.mu.Lock()
	up := rt.Status == StatusRunning
	s.mu.Unlock()
	if up {
		s.warm.learn(s, req)
	}
}

// update runs fn on rt under the lock and saves it, unless rt was stopped
// meanwhile.
func (s *Service) update(rt *runtime, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt.Status == StatusStopped {
		return
	}
	fn()
	s.save(rt)
}

// awaitReady probes the Agent Server through the sandbox until /alive
// answers, failing the runtime when its command ends first.
func (s *Service) awaitReady(ctx context.Context, rt *runtime) {
	s.mu.Lock()
	id, ex := rt.SandboxID, rt.exec
	if ex == nil {
		ex = s.executor(id)
		rt.exec = ex
	}
	s.mu.Unlock()
	exited, err := s.waitAlive(ctx, id, ex)
	switch {
	case exited != nil:
		logs := s.logTail(ctx, ex)
		s.update(rt, func() { rt.fail(PodFailed, exitDetail(*exited), logs) })
	case err == nil:
		s.update(rt, func() {
			if rt.Status == StatusStarting {
				rt.Status, rt.PodStatus, rt.Detail = StatusRunning, PodReady, ""
			}
		})
		s.watch(rt)
	case s.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		logs := s.logTail(context.Background(), ex)
		s.update(rt, func() {
			rt.fail(PodFailed, fmt.Sprintf("the Agent Server did not answer /alive within %s", s.cfg.ReadyTimeout), logs)
		})
	}
}

// waitAlive probes the Agent Server of sandbox id through the sandbox
// until /alive answers (nil, nil), its command ends (its status), or ctx
// ends (ctx's error).
func (s *Service) waitAlive(ctx context.Context, id string, ex *execclient.Client) (*execapi.MainCmdStatus, error) {
	probe := s.prober(id)
	defer probe.CloseIdleConnections()
	delay := 50 * time.Millisecond
	for {
		if s.alive(ctx, probe) {
			return nil, nil
		}
		if st, err := ex.MainCmd(ctx); err == nil && st.State == execapi.MainCmdExited {
			return &st, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// prober is an HTTP client whose connections go to the Agent Server's port
// of sandbox id, the way the proxy reaches it.
func (s *Service) prober(id string) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return s.be.DialPort(ctx, id, AgentServerPort)
			},
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
		},
	}
}

// alive reports whether GET /alive answers 2xx.
func (s *Service) alive(ctx context.Context, c *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent-server/alive", nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// logTail is the tail of the service's output, or "" when it cannot be
// read.
func (s *Service) logTail(ctx context.Context, ex *execclient.Client) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, _, err := ex.MainCmdLogTail(ctx, s.cfg.LogTailBytes)
	if err != nil {
		return ""
	}
	return out
}

// exitDetail says how the Agent Server's command ended.
func exitDetail(st execapi.MainCmdStatus) string {
	if st.Exit == nil {
		return "the Agent Server exited"
	}
	switch {
	case st.Exit.Error != "":
		return "CreateContainerError: the command could not start: " + st.Exit.Error
	case st.Exit.Signal != "":
		return fmt.Sprintf("Error: the Agent Server was killed by %s", st.Exit.Signal)
	}
	return fmt.Sprintf("Error: the Agent Server exited with code %d", st.Exit.ExitCode)
}

// resolveImage applies the alias map; tree says whether the image gets
// the self-contained Agent Server tree.
func (s *Service) resolveImage(image string) (string, bool) {
	resolved := image
	for _, a := range s.cfg.Aliases {
		if matchGlob(a.Pattern, image) {
			resolved = a.Image
			break
		}
	}
	tree := false
	if s.cfg.AgentTree != "" {
		for _, p := range s.cfg.TreeImages {
			if matchGlob(p, image) || matchGlob(p, resolved) {
				tree = true
			}
		}
	}
	return resolved, tree
}

// ensureImage makes image present per the pull policy. Its errors start
// with the Kubernetes markers the clients classify.
func (s *Service) ensureImage(ctx context.Context, image, policy string) (*sbx.Image, error) {
	if policy != "Always" {
		img, err := s.be.InspectImage(ctx, image)
		if err == nil {
			return img, nil
		}
		if !errors.Is(err, sbx.ErrImageNotFound) && !errors.Is(err, sbx.ErrNotFound) {
			return nil, fmt.Errorf("ErrImagePull: look up %s: %w", image, err)
		}
		if policy == "Never" {
			return nil, fmt.Errorf("ErrImageNeverPull: image %s is not present with pull policy of Never", image)
		}
	}
	if _, err := s.be.PullImage(ctx, image, nil); err != nil {
		return nil, fmt.Errorf("ErrImagePull: %w", err)
	}
	img, err := s.be.InspectImage(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("ErrImagePull: %s pulled but not found: %w", image, err)
	}
	return img, nil
}

// sandboxOptions turns a start request into the sandbox's options and the
// Agent Server's service spec.
func (s *Service) sandboxOptions(rt *runtime, req StartRequest, img *sbx.Image, tree bool) (sbx.Options, execapi.MainCmdSpec, error) {
	factor := req.ResourceFactor
	if factor <= 0 {
		factor = 1
	}
	lim := s.cfg.BaseLimits
	lim.MemoryBytes = int64(float64(lim.MemoryBytes) * factor)
	lim.DiskBytes = int64(float64(lim.DiskBytes) * factor)
	lim.Pids = int64(float64(lim.Pids) * factor)
	lim.CPUs *= factor
	opts := sbx.Options{
		Name:    rt.RuntimeID,
		Image:   img.Name,
		Pull:    "never",
		Network: s.cfg.Network,
		Egress:  s.cfg.Egress,
		Limits:  lim,
		Labels:  map[string]string{"sbx.openhands/runtime-id": rt.RuntimeID, "sbx.openhands/session-id": rt.SessionID},
	}
	argv := []string(req.Command)
	if len(argv) == 0 && img.Config != nil {
		argv = append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
	}
	if len(argv) == 0 {
		return opts, execapi.MainCmdSpec{}, errors.New("no command given and the image has none")
	}
	if tree {
		opts.Volumes = append(opts.Volumes, sbx.Volume{HostPath: s.cfg.AgentTree, Path: "/agent-server", ReadOnly: true})
		argv = treeCommand(argv)
	}
	user := ""
	if req.RunAsUser != nil {
		group := req.RunAsGroup
		if group == nil {
			group = req.FSGroup
		}
		user = strconv.Itoa(*req.RunAsUser)
		if group != nil {
			user += ":" + strconv.Itoa(*group)
		}
	}
	env := map[string]string{}
	for k, v := range s.cfg.Environment {
		env[k] = v
	}
	for k, v := range req.Environment {
		env[k] = v
	}
	env["SESSION_API_KEY"] = rt.Key
	env["OH_SESSION_API_KEYS_0"] = rt.Key
	spec := execapi.MainCmdSpec{Argv: argv, Env: env, User: user, Cwd: req.WorkingDir, CreateCwd: req.WorkingDir != ""}
	return opts, spec, nil
}

// treeCommand points the clients' Agent Server commands at the mounted
// tree's python: the "binary" target's /usr/local/bin/openhands-agent-server
// and any other python; the "source" target's path already lies in it.
func treeCommand(argv []string) []string {
	const python = "/agent-server/.venv/bin/python"
	switch {
	case argv[0] == "/usr/local/bin/openhands-agent-server" || argv[0] == "openhands-agent-server" || argv[0] == "agent-server":
		return append([]string{python, "-m", "openhands.agent_server"}, argv[1:]...)
	}
	return argv
}
