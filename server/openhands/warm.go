package openhands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

// Warm Agent Servers. A shape is what a start asks for that the Agent
// Server reads when it boots: the image (alias resolved), command,
// working directory, user and groups, limits (resource_factor), network,
// and the boot part of the environment (bootVar, plus the operator's
// Environment). Each shape is a warm pool (docs/pools.md) whose members
// boot the clients' own command with that environment, OH_DEFERRED_INIT
// and a key K of the member's own as SESSION_API_KEY and
// OH_SESSION_API_KEYS_0 (so it listens on every address and its VS Code
// token is K already), and are claimable once GET /api/init answers
// "dormant". POST /start claims a member of the request's shape and, before
// replying, hands it the session with POST /api/init (X-Init-API-Key: K,
// the session key K and the request's other variables): the runtime is
// running at once. Any other answer removes the member and the start
// goes the cold way. Agent Servers that predate deferred init (GET
// /api/init answers 404) are pooled by exact environment instead.

// WarmConfig says which Agent Servers are kept booted ahead.
type WarmConfig struct {
	// Size is how many dormant Agent Servers a shape keeps (0: no warm
	// Agent Servers). At most MaxWarmSize.
	Size int
	// Shapes are kept warm from the start.
	Shapes []WarmShape
	// Learn is how many shapes of recent cold starts are kept warm besides
	// (the app server and the SDK send the same request on every start):
	// the oldest goes when a new one comes.
	Learn int
}

// MaxWarmSize caps the dormant Agent Servers of one shape.
const MaxWarmSize = 16

// WarmShape is a start to keep warm: what POST /start would carry (no
// session), with a name for GET /api/warm-runtime-configs and an optional
// size of its own. In a file: {"configs": [{"name": ..., "image": ...,
// "command": ..., "working_dir": ..., "environment": {...}, ...}]}.
type WarmShape struct {
	Name string `json:"name"`
	Size int    `json:"size,omitempty"`
	// Egress is the egress policy of the shape's runtimes, warm or cold,
	// in --egress's syntax (CIDRs and host names, "!" denies, "none"):
	// "api.openai.com" lets its Agent Servers reach their LLM and nothing
	// else. Empty: Config.Egress. Its dormant members idle under it too.
	Egress string `json:"egress,omitempty"`
	StartRequest
}

// WarmFile is the file form of WarmConfig.Shapes, the same object GET
// /api/warm-runtime-configs returns.
type WarmFile struct {
	Configs []WarmShape `json:"configs"`
}

// WarmConfigs is the reply of GET /api/warm-runtime-configs: the shapes
// kept warm, which OpenHands' DynamicRemoteSandboxSpecService uses as its
// sandbox specs so that it asks for exactly them.
type WarmConfigs struct {
	Configs []WarmRuntimeConfig `json:"configs"`
}

// WarmRuntimeConfig is one shape as the app server reads it, with sbx's
// counts of it.
type WarmRuntimeConfig struct {
	Name        string            `json:"name"`
	Image       string            `json:"image"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	WorkingDir  string            `json:"working_dir"`
	// Warm is what sbx keeps of the shape (not part of the upstream
	// contract).
	Warm WarmStatus `json:"sbx_warm"`
}

// WarmStatus counts a shape's warm starts since the server started.
type WarmStatus struct {
	Pool         string `json:"pool"`
	Size         int    `json:"size"`
	Egress       string `json:"egress,omitempty"` // the shape's own egress policy
	Ready        int    `json:"ready"`
	Deferred     bool   `json:"deferred_init"`
	Learned      bool   `json:"learned"`
	Hits         uint64 `json:"hits"`
	Misses       uint64 `json:"misses"`
	InitFailures uint64 `json:"init_failures"`
	// LastBootS is the latest boot of a member, until dormant.
	LastBootS float64 `json:"last_boot_seconds"`
	LastError string  `json:"last_error,omitempty"`
}

// WarmPools is what warm Agent Servers need of sbx besides Backend: warm
// pools, claims completed by a hook (the Agent Server's /api/init) and
// the pools' counts. The front-end supplies it (Config.WarmPools,
// UpOptions.WarmPools): sbx serve and sbx openhands up pass their local
// host (sandbox.Host, or its PolicyView), which also is their Backend.
type WarmPools interface {
	sbx.Pools
	Claim(ctx context.Context, opts sbx.Options, hook sandbox.ClaimHook) (*sbx.Sandbox, error)
	PoolStats() map[string]sbx.PoolStats
}

var (
	_ WarmPools = (*sandbox.Host)(nil)
	_ WarmPools = (*sandbox.PolicyView)(nil)
)

// The Agent Server's deferred init (openhands-agent-server 1.29 and
// later).
const (
	initPath      = "/api/init"
	initKeyHeader = "X-Init-API-Key"
	stateDormant  = "dormant"
	stateReady    = "ready"
	// initTimeout bounds POST /api/init (it may restart VS Code when the
	// token changes, which it does not here).
	initTimeout = time.Minute
)

// keyVars are the Agent Server's session key variables; sbx sets them.
var keyVars = []string{"SESSION_API_KEY", "OH_SESSION_API_KEYS_0"}

// bootVar says whether the Agent Server reads variable k when it boots:
// its configuration (OH_*), logging, VS Code's root and tmux's directory.
// Everything else is read later (LLM settings, tool credentials) and goes
// in /api/init's env.
func bootVar(k string) bool {
	for _, p := range []string{"OH_", "LOG_", "DEBUG", "OPENHANDS_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	switch k {
	case "OPENVSCODE_SERVER_ROOT", "TMUX_TMPDIR", "LOG_LEVEL", "LOG_JSON":
		return true
	}
	return false
}

// shape is one warm shape and its pool.
type shape struct {
	name     string
	req      StartRequest // as asked, for warm-runtime-configs
	spec     sbx.PoolSpec // the pool; its Options are what a claim asks for
	bootEnv  map[string]string
	egress   string // the shape's own egress policy (WarmShape.Egress)
	size     int
	deferred bool
	learned  bool
	lastUsed time.Time

	hits, misses, initFailures uint64
}

// warm is the Service's warm state.
type warm struct {
	be     WarmPools
	prefix string // of its pools' names

	mu      sync.Mutex
	shapes  map[string]*shape // by pool name
	dropped []string          // pools of shapes no longer kept
	wake    chan struct{}
}

// warmPrefix starts the names of the warm pools. Runtime APIs over the
// same host share them: a shape's pool name is a hash of its options.
const warmPrefix = "openhands-"

// newWarm sets up warm Agent Servers when cfg asks for them; nil when it
// does not.
func (s *Service) newWarm() (*warm, error) {
	c := s.cfg.Warm
	if c.Size <= 0 && len(c.Shapes) == 0 {
		return nil, nil
	}
	if c.Size < 0 || c.Size > MaxWarmSize || c.Learn < 0 {
		return nil, fmt.Errorf("openhands: warm size %d: use 0 to %d", c.Size, MaxWarmSize)
	}
	wb := s.cfg.WarmPools // New checked it is set
	w := &warm{be: wb, prefix: warmPrefix, shapes: map[string]*shape{}, wake: make(chan struct{}, 1)}
	for i, sh := range c.Shapes {
		size := sh.Size
		if size == 0 {
			size = c.Size
		}
		if size < 0 || size > MaxWarmSize {
			return nil, fmt.Errorf("openhands: warm shape %q: size %d: use 0 to %d", sh.Name, size, MaxWarmSize)
		}
		if sh.Image == "" {
			return nil, fmt.Errorf("openhands: warm shape %d (%q) has no image", i, sh.Name)
		}
		if sh.Name == "" {
			sh.Name = fmt.Sprintf("warm-%d", i+1)
		}
		if size == 0 {
			continue
		}
		if _, err := w.add(s, sh.Name, sh.StartRequest, sh.Egress, size, true, false); err != nil {
			return nil, fmt.Errorf("openhands: warm shape %q: %w", sh.Name, err)
		}
	}
	// Pools of shapes an earlier server kept and this one does not.
	if pools, err := wb.ListPools(s.ctx); err == nil {
		for _, p := range pools {
			if strings.HasPrefix(p.Name, warmPrefix) && w.shapes[p.Name] == nil {
				w.dropped = append(w.dropped, p.Name)
			}
		}
	}
	return w, nil
}

// add makes the shape of req (deferred init or not) known, with its own
// egress policy (none: the service's), returning it; an existing one is
// returned as it is, but two configured shapes of the same start must
// not differ in their policy. Called without w.mu.
func (w *warm) add(s *Service, name string, req StartRequest, egress string, size int, deferred, learned bool) (*shape, error) {
	sh, err := w.shapeOf(s, req, deferred)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur := w.shapes[sh.spec.Name]; cur != nil {
		if !learned && cur.egress != egress {
			return nil, fmt.Errorf("shape %q is the start of shape %q with another egress policy (%q, %q): give the same one", name, cur.name, egress, cur.egress)
		}
		return cur, nil
	}
	if egress != "" {
		sh.egress, sh.spec.Options.Egress = egress, egress
	}
	if name == "" {
		name = "learned-" + strings.TrimPrefix(sh.spec.Name, w.prefix)
	}
	sh.name, sh.size, sh.learned, sh.lastUsed = name, size, learned, time.Now()
	sh.spec.Size = size
	w.shapes[sh.spec.Name] = sh
	w.poke()
	return sh, nil
}

func (w *warm) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// shapeOf computes the shape of req: its pool's definition (the name a
// hash of it) and the boot environment.
func (w *warm) shapeOf(s *Service, req StartRequest, deferred bool) (*shape, error) {
	image, tree := s.resolveImage(req.Image)
	if tree {
		return nil, errors.New("images that get the agent tree are not kept warm")
	}
	// The image's command is only needed when the request has none.
	img := &sbx.Image{Name: image}
	if len(req.Command) == 0 {
		var err error
		if img, err = s.be.InspectImage(s.ctx, image); err != nil {
			return nil, err
		}
	}
	opts, svc, err := s.sandboxOptions(&runtime{}, req, img, false)
	if err != nil {
		return nil, err
	}
	boot := map[string]string{}
	for k, v := range svc.Env {
		if slices.Contains(keyVars, k) {
			continue
		}
		if _, operator := s.cfg.Environment[k]; !deferred || operator || bootVar(k) {
			boot[k] = v
		}
	}
	env := []string{}
	for k, v := range boot {
		env = append(env, k+"="+v)
	}
	if deferred {
		env = append(env, "OH_DEFERRED_INIT=true")
	}
	sort.Strings(env)
	opts.Name, opts.Labels = "", nil
	opts.Cmd, opts.Env, opts.Workdir, opts.User = svc.Argv, env, svc.Cwd, svc.User
	check := &sbx.ReadyCheck{Port: AgentServerPort, Path: "/alive", Timeout: s.cfg.ReadyTimeout}
	if deferred {
		check.Path, check.Body = initPath, `"`+stateDormant+`"`
	}
	data, _ := json.Marshal(opts)
	sum := sha256.Sum256(data)
	spec := sbx.PoolSpec{Name: w.prefix + hex.EncodeToString(sum[:6]), Options: opts, KeyEnv: keyVars, ReadyCheck: check}
	return &shape{req: req, spec: spec, bootEnv: boot, deferred: deferred}, nil
}

// claimWarm starts rt's runtime from a warm Agent Server of req's shape:
// nil when it did (rt is then running with the member's key), else why
// not (the start then goes the cold way).
func (s *Service) claimWarm(rt *runtime, req StartRequest) error {
	w := s.warm
	if w == nil {
		return errors.New("no warm Agent Servers configured")
	}
	sh, env, err := w.match(s, req)
	if err != nil {
		return err
	}
	opts := sh.spec.Options
	opts.Name = rt.RuntimeID
	opts.Labels = map[string]string{"sbx.openhands/runtime-id": rt.RuntimeID, "sbx.openhands/session-id": rt.SessionID}
	ctx, cancel := context.WithTimeout(s.ctx, 2*initTimeout)
	defer cancel()
	var key string
	sb, err := w.be.Claim(ctx, opts, func(ctx context.Context, m *sandbox.PoolMember) error {
		key = m.Key
		if m.Key == "" {
			return errors.New("the member has no key")
		}
		if !sh.deferred {
			return nil
		}
		return s.initAgentServer(ctx, m.Sandbox.ID, sh.initKey(m.Key), m.Key, env)
	})
	w.mu.Lock()
	switch {
	case err == nil:
		sh.hits++
	case errors.Is(err, sandbox.ErrNoMember):
		sh.misses++
	default:
		sh.initFailures++
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	spec := sh.spec.Options
	full := map[string]string{}
	for k, v := range sh.bootEnv {
		full[k] = v
	}
	for k, v := range env {
		full[k] = v
	}
	full["SESSION_API_KEY"], full["OH_SESSION_API_KEYS_0"] = key, key
	rt.Key, rt.SandboxID, rt.exec = key, sb.ID, s.executor(sb.ID)
	rt.Status, rt.PodStatus = StatusRunning, PodReady
	// A restart (a key rotated on resume) boots it the cold way.
	rt.Service.Argv, rt.Service.Env, rt.Service.User, rt.Service.Cwd, rt.Service.CreateCwd = spec.Cmd, full, spec.User, spec.Workdir, spec.Workdir != ""
	return nil
}

// match finds the shape of req with a pool, deferred first, and returns
// it with the variables /api/init hands over.
func (w *warm) match(s *Service, req StartRequest) (*shape, map[string]string, error) {
	for _, deferred := range []bool{true, false} {
		sh, err := w.shapeOf(s, req, deferred)
		if err != nil {
			return nil, nil, err
		}
		w.mu.Lock()
		cur := w.shapes[sh.spec.Name]
		if cur != nil {
			cur.lastUsed = time.Now()
		}
		w.mu.Unlock()
		if cur == nil {
			continue
		}
		return cur, cur.initEnv(req), nil
	}
	return nil, nil, errors.New("no warm shape matches")
}

// egressOf is the egress policy of req's shape, when req has a shape of
// its own policy: a cold start of it gets the policy a warm one gets.
func (w *warm) egressOf(s *Service, req StartRequest) string {
	if w == nil {
		return ""
	}
	sh, _, err := w.match(s, req)
	if err != nil {
		return ""
	}
	return sh.egress
}

// initKey is what /api/init wants in X-Init-API-Key: the Agent Server's
// secret key, which is the member's key K unless the shape sets
// OH_SECRET_KEY.
func (sh *shape) initKey(member string) string {
	if k := strings.TrimSpace(sh.bootEnv["OH_SECRET_KEY"]); k != "" {
		return k
	}
	return member
}

// initEnv is what of req's environment /api/init hands over: what the
// shape did not boot with.
func (sh *shape) initEnv(req StartRequest) map[string]string {
	env := map[string]string{}
	for k, v := range req.Environment {
		if _, boot := sh.bootEnv[k]; !boot && !slices.Contains(keyVars, k) {
			env[k] = v
		}
	}
	return env
}

// learn keeps the shape of req, a start that came up cold, warm from now
// on (when learning is on), dropping the least recently used learned
// shape beyond Learn.
func (w *warm) learn(s *Service, req StartRequest) {
	if w == nil || s.cfg.Warm.Learn <= 0 || s.cfg.Warm.Size <= 0 {
		return
	}
	req.SessionID, req.ImagePullPolicy = "", ""
	if _, err := w.add(s, "", req, "", s.cfg.Warm.Size, true, true); err != nil {
		s.log.Debug("openhands: not keeping this start's shape warm", "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var learned []*shape
	for _, sh := range w.shapes {
		if sh.learned {
			learned = append(learned, sh)
		}
	}
	sort.Slice(learned, func(i, j int) bool { return learned[i].lastUsed.After(learned[j].lastUsed) })
	for _, sh := range learned[min(len(learned), s.cfg.Warm.Learn):] {
		delete(w.shapes, sh.spec.Name)
		w.dropped = append(w.dropped, sh.spec.Name)
	}
	w.poke()
}

// initAgentServer hands a dormant Agent Server its session: POST
// /api/init with the member's key (initKey), the session key and env.
func (s *Service) initAgentServer(ctx context.Context, sandboxID, initKey, sessionKey string, env map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"session_api_keys": []string{sessionKey}, "env": env})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent-server"+initPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(initKeyHeader, initKey)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return s.be.DialPort(ctx, sandboxID, AgentServerPort)
		},
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", initPath, err)
	}
	defer resp.Body.Close()
	// The Agent Server's answer is the sandbox's: a bounded read.
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st struct {
		State string `json:"state"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &st) != nil || st.State != stateReady {
		return fmt.Errorf("POST %s answered HTTP %d %.200q, not %q", initPath, resp.StatusCode, data, stateReady)
	}
	return nil
}

// keepWarm keeps a pool defined for every shape and none for shapes
// gone, until the service closes. The sandbox host fills the pools, one
// boot at a time. A deferred shape whose Agent Server refuses /api/init
// (older than deferred init) turns into an exact-environment one.
func (s *Service) keepWarm(ctx context.Context) {
	w := s.warm
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		w.sync(ctx, s)
		select {
		case <-ctx.Done():
			w.drainAll(s)
			return
		case <-tick.C:
		case <-w.wake:
		}
	}
}

// sync makes the pools match the shapes: a pool for each, and none for
// shapes dropped.
func (w *warm) sync(ctx context.Context, s *Service) {
	pools, err := w.be.ListPools(ctx)
	if err != nil {
		s.log.Warn("openhands: warm pools", "err", err)
		return
	}
	stats := w.be.PoolStats()
	have := map[string]bool{}
	for _, p := range pools {
		have[p.Name] = true
	}
	w.mu.Lock()
	dropped := w.dropped
	w.dropped = nil
	var old []*shape
	want := map[string]*shape{}
	for name, sh := range w.shapes {
		if sh.deferred && strings.Contains(stats[name].LastError, "HTTP 404") {
			// An Agent Server without deferred init: exact environment.
			delete(w.shapes, name)
			dropped = append(dropped, name)
			old = append(old, sh)
			continue
		}
		want[name] = sh
	}
	w.mu.Unlock()
	for _, sh := range old {
		s.log.Info("openhands: this Agent Server has no deferred init; keeping it warm by exact environment", "image", sh.req.Image)
		if _, err := w.add(s, sh.name, sh.req, sh.egress, sh.size, false, sh.learned); err != nil {
			s.log.Warn("openhands: warm shape", "name", sh.name, "err", err)
		}
	}
	for _, name := range dropped {
		if !have[name] || want[name] != nil {
			continue
		}
		if _, err := w.be.RemovePool(ctx, name); err != nil && !errors.Is(err, sbx.ErrNotFound) {
			s.log.Warn("openhands: remove a warm pool no shape needs", "pool", name, "err", err)
		}
	}
	for name, sh := range want {
		if have[name] {
			continue
		}
		if _, err := w.be.CreatePool(ctx, sh.spec); err != nil && !errors.Is(err, sbx.ErrNameInUse) {
			s.log.Warn("openhands: define a warm pool", "shape", sh.name, "err", err)
		}
	}
}

// drainAll removes the service's pools when it closes: dormant Agent
// Servers are no one's. It waits briefly: a member still booting is
// removed by the host's next gc (its pool is gone).
func (w *warm) drainAll(s *Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w.mu.Lock()
	names := make([]string, 0, len(w.shapes))
	for name := range w.shapes {
		names = append(names, name)
	}
	w.mu.Unlock()
	for _, name := range names {
		if _, err := w.be.RemovePool(ctx, name); err != nil && !errors.Is(err, sbx.ErrNotFound) {
			s.log.Warn("openhands: remove a warm pool", "pool", name, "err", err)
		}
	}
}

// WarmConfigs returns the shapes kept warm, for GET
// /api/warm-runtime-configs.
func (s *Service) WarmConfigs(ctx context.Context) WarmConfigs {
	out := WarmConfigs{Configs: []WarmRuntimeConfig{}}
	w := s.warm
	if w == nil {
		return out
	}
	stats := w.be.PoolStats()
	ready := map[string]int{}
	if pools, err := w.be.ListPools(ctx); err == nil {
		for _, p := range pools {
			ready[p.Name] = len(p.Ready)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, sh := range w.shapes {
		env := map[string]string{}
		for k, v := range sh.req.Environment {
			env[k] = v
		}
		cmd := []string(sh.req.Command)
		if cmd == nil {
			cmd = []string{}
		}
		st := stats[name]
		out.Configs = append(out.Configs, WarmRuntimeConfig{Name: sh.name, Image: sh.req.Image, Command: cmd, Environment: env, WorkingDir: sh.req.WorkingDir,
			Warm: WarmStatus{Pool: name, Size: sh.size, Egress: sh.egress, Ready: ready[name], Deferred: sh.deferred, Learned: sh.learned,
				Hits: sh.hits, Misses: sh.misses, InitFailures: sh.initFailures, LastBootS: st.LastBootS, LastError: st.LastError}})
	}
	sort.Slice(out.Configs, func(i, j int) bool { return out.Configs[i].Name < out.Configs[j].Name })
	return out
}
