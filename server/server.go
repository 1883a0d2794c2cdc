package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/version"
	"github.com/sbxrun/sbx/server/api"
)

// OpenAPI is the OpenAPI 3 document of the server's API; GET
// /v1/openapi.yaml serves it and a test checks it against Routes.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Backend is what the server serves: sandboxes and images, the
// contract's interfaces. sbx serve passes a *sandbox.Host; a test or a
// gateway may pass anything that implements them.
type Backend interface {
	sbx.Sandboxes
	sbx.Images
}

// Background is a backend's work between requests (a *sandbox.Host has
// it): Start starts it, the metrics count sandboxes by state, OOM kills
// and what the warm pools did from it, and a new event stream starts
// after its latest event.
type Background interface {
	// StartBackground re-adopts running sandboxes and starts watching.
	StartBackground(ctx context.Context) error
	// StatusCounts returns the sandboxes in each status and the OOM kills
	// seen.
	StatusCounts() (map[sbx.Status]int, uint64)
	// LastEventSeq returns the sequence number of the latest event.
	LastEventSeq() uint64
	// PoolStats counts what each warm pool did.
	PoolStats() map[string]sbx.PoolStats
	// EgressCounts counts the decisions of the egress daemon it runs.
	EgressCounts() []sbx.EgressCount
}

// Config configures a Server. Zero values take the defaults in brackets.
type Config struct {
	// Backend runs the sandboxes and holds the images. Required.
	Backend Backend
	// Background is the backend's background work, usually the Backend
	// itself (sbx serve passes its *sandbox.Host as both); nil: none (no
	// start, no sandbox gauges, event streams from their first event).
	Background Background
	// Token is the bearer token every route but /healthz requires. Empty
	// turns auth off: only for a unix socket with mode 0600, or when the
	// operator asked for it explicitly (--insecure-no-auth).
	Token string
	// MaxBodyBytes caps JSON request bodies [1 MiB].
	MaxBodyBytes int64
	// MaxUploadBytes caps bodies proxied to an executor (file and archive
	// uploads) and image archive uploads [1 GiB].
	MaxUploadBytes int64
	// MaxReplyBytes caps a reply proxied from an executor [1 GiB].
	MaxReplyBytes int64
	// ProxyTimeout bounds one proxied executor call, streaming included
	// [1h].
	ProxyTimeout time.Duration
	// MaxConcurrentCreates bounds creates in flight; more get 429 [16].
	MaxConcurrentCreates int
	// Logger receives the server's logs [slog.Default()].
	Logger *slog.Logger
}

// Server serves the REST API. Create it with New, serve Handler on any
// number of listeners, call Start once and Close at the end.
type Server struct {
	cfg       Config
	b         Backend
	log       *slog.Logger
	tokenHash *[sha256.Size]byte
	mux       *http.ServeMux
	handler   http.Handler
	metrics   *metrics
	proxy     *executorProxy
	creates   chan struct{}

	// done is closed by Shutdown: streaming handlers return.
	done      chan struct{}
	closeOnce sync.Once
	closed    sync.Once
}

// New checks cfg and builds the server. It starts nothing; see Start.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("server: a backend (sandbox.Host) is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	if cfg.MaxReplyBytes <= 0 {
		cfg.MaxReplyBytes = 1 << 30
	}
	if cfg.ProxyTimeout <= 0 {
		cfg.ProxyTimeout = time.Hour
	}
	if cfg.MaxConcurrentCreates <= 0 {
		cfg.MaxConcurrentCreates = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:     cfg,
		b:       cfg.Backend,
		log:     cfg.Logger,
		creates: make(chan struct{}, cfg.MaxConcurrentCreates),
		done:    make(chan struct{}),
	}
	if cfg.Token != "" {
		h := sha256.Sum256([]byte(cfg.Token))
		s.tokenHash = &h
	}
	s.metrics = newMetrics()
	s.proxy = newExecutorProxy(s)
	if cfg.Background != nil {
		s.metrics.registerBackend(cfg.Background)
		s.metrics.registerPools(cfg.Background)
		s.metrics.registerEgress(cfg.Background)
	}
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.metrics.instrument(rt.Method+" "+rt.Pattern, rt.handler))
	}
	s.mux.Handle("/", s.metrics.instrument("unmatched", http.HandlerFunc(s.notFound)))
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Route is one route of the API.
type Route struct {
	Method  string
	Pattern string // net/http ServeMux pattern without the method
	// NoAuth is true only for /healthz.
	NoAuth  bool
	handler http.Handler
}

// Routes lists every route the server answers, for documentation and for
// the test that checks the OpenAPI document.
func Routes() []Route {
	s := &Server{}
	rs := s.routes()
	for i := range rs {
		rs[i].handler = nil
	}
	return rs
}

func (s *Server) routes() []Route {
	h := func(method, pattern string, f http.HandlerFunc) Route {
		return Route{Method: method, Pattern: pattern, handler: f}
	}
	p := func(method, pattern string) Route {
		return Route{Method: method, Pattern: pattern, handler: http.HandlerFunc(s.proxyExecutor)}
	}
	return []Route{
		{Method: http.MethodGet, Pattern: "/healthz", NoAuth: true, handler: http.HandlerFunc(s.healthz)},
		h(http.MethodGet, "/metrics", s.serveMetrics),
		h(http.MethodGet, "/v1/openapi.yaml", s.openapi),
		h(http.MethodGet, "/v1/info", s.hostInfo),
		h(http.MethodPost, "/v1/gc", s.gc),
		h(http.MethodGet, "/v1/system/df", s.diskUsage),
		h(http.MethodPost, "/v1/system/prune", s.prune),
		h(http.MethodPost, "/v1/sandboxes", s.createSandbox),
		h(http.MethodGet, "/v1/sandboxes", s.listSandboxes),
		h(http.MethodGet, "/v1/sandboxes/{id}", s.getSandbox),
		h(http.MethodDelete, "/v1/sandboxes/{id}", s.removeSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/pause", s.pauseSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/resume", s.resumeSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/stop", s.stopSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/start", s.startSandbox),
		h(http.MethodGet, "/v1/sandboxes/{id}/stats", s.sandboxStats),
		h(http.MethodPost, "/v1/sandboxes/{id}/commit", s.commitSandbox),
		h(http.MethodGet, "/v1/sandboxes/{id}/logs", s.sandboxLogs),
		h(http.MethodPost, "/v1/sandboxes/{id}/wait", s.waitSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/signal", s.signalSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/rename", s.renameSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/egress", s.setEgress),
		h(http.MethodPost, "/v1/sandboxes/{id}/renew", s.renewSandbox),
		h(http.MethodGet, "/v1/sandboxes/{id}/diff", s.diffSandbox),
		h(http.MethodGet, "/v1/sandboxes/{id}/top", s.topSandbox),
		h(http.MethodGet, "/v1/sandboxes/{id}/export", s.exportSandbox),
		// The executor's API, proxied unchanged.
		h(http.MethodGet, "/v1/sandboxes/{id}/connect", s.connectExecutor),
		h(http.MethodGet, "/v1/sandboxes/{id}/ports/{port}/connect", s.connectPort),
		p(http.MethodGet, "/v1/sandboxes/{id}/info"),
		p(http.MethodPost, "/v1/sandboxes/{id}/exec"),
		p(http.MethodPost, "/v1/sandboxes/{id}/sessions"),
		p(http.MethodGet, "/v1/sandboxes/{id}/sessions"),
		p(http.MethodDelete, "/v1/sandboxes/{id}/sessions/{session}"),
		p(http.MethodPost, "/v1/sandboxes/{id}/sessions/{session}/run"),
		p(http.MethodGet, "/v1/sandboxes/{id}/files"),
		p(http.MethodPut, "/v1/sandboxes/{id}/files"),
		p(http.MethodPost, "/v1/sandboxes/{id}/files/edit"),
		p(http.MethodGet, "/v1/sandboxes/{id}/fs/list"),
		p(http.MethodGet, "/v1/sandboxes/{id}/fs/archive"),
		p(http.MethodPut, "/v1/sandboxes/{id}/fs/archive"),
		// Images.
		h(http.MethodPost, "/v1/images/pull", s.pullImage),
		h(http.MethodGet, "/v1/images", s.listImages),
		h(http.MethodPost, "/v1/images/gc", s.gcImages),
		h(http.MethodPost, "/v1/images/import", s.importImage),
		h(http.MethodPost, "/v1/images/prepare", s.prepareImage),
		h(http.MethodPost, "/v1/images/build", s.buildImage),
		h(http.MethodPost, "/v1/images/build/prune", s.pruneBuildCache),
		h(http.MethodPost, "/v1/images/tag", s.tagImage),
		h(http.MethodPost, "/v1/images/save", s.saveImages),
		h(http.MethodGet, "/v1/images/history", s.imageHistory),
		h(http.MethodGet, "/v1/images/{ref...}", s.inspectImage),
		h(http.MethodDelete, "/v1/images/{ref...}", s.removeImage),
		// Checkpoints and snapshots.
		h(http.MethodPost, "/v1/sandboxes/{id}/checkpoint", s.checkpointSandbox),
		h(http.MethodPost, "/v1/sandboxes/{id}/fork", s.forkSandbox),
		h(http.MethodGet, "/v1/snapshots", s.listSnapshots),
		h(http.MethodPost, "/v1/snapshots/import", s.importSnapshot),
		h(http.MethodGet, "/v1/snapshots/{name}", s.inspectSnapshot),
		h(http.MethodDelete, "/v1/snapshots/{name}", s.removeSnapshot),
		h(http.MethodPost, "/v1/snapshots/{name}/restore", s.restoreSnapshot),
		h(http.MethodGet, "/v1/snapshots/{name}/export", s.exportSnapshot),
		// Named volumes.
		h(http.MethodPost, "/v1/volumes", s.createVolume),
		h(http.MethodGet, "/v1/volumes", s.listVolumes),
		h(http.MethodPost, "/v1/volumes/prune", s.pruneVolumes),
		h(http.MethodGet, "/v1/volumes/{name}", s.inspectVolume),
		h(http.MethodDelete, "/v1/volumes/{name}", s.removeVolume),
		// Warm pools.
		h(http.MethodPost, "/v1/pools", s.createPool),
		h(http.MethodGet, "/v1/pools", s.listPools),
		h(http.MethodGet, "/v1/pools/{name}", s.getPool),
		h(http.MethodDelete, "/v1/pools/{name}", s.poolOp((sbx.Pools).RemovePool)),
		h(http.MethodPost, "/v1/pools/{name}/fill", s.poolOp((sbx.Pools).FillPool)),
		h(http.MethodPost, "/v1/pools/{name}/drain", s.poolOp((sbx.Pools).DrainPool)),
		// Events.
		h(http.MethodGet, "/v1/events", s.streamEvents),
	}
}

// Handler returns the API: auth, then the routes.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sbx"`)
		s.metrics.errors.Inc(api.CodeUnauthorized)
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "missing or wrong bearer token: send Authorization: Bearer <token>")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized compares the request's bearer token with the configured one
// in constant time (of equal-length hashes, so the length leaks nothing
// either).
func (s *Server) authorized(r *http.Request) bool {
	if s.tokenHash == nil {
		return true
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) == 1
}

// Start starts the backend's background work, if it has any: a
// sandbox.Host re-adopts the sandboxes a previous server (or the CLI) left
// running and watches for changes, expired TTLs and its network pool.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.Background != nil {
		return s.cfg.Background.StartBackground(ctx)
	}
	return nil
}

// Shutdown ends streaming responses (events) so that an http.Server's
// Shutdown can finish; register it with http.Server.RegisterOnShutdown.
// Sandboxes keep running.
func (s *Server) Shutdown() {
	s.closeOnce.Do(func() { close(s.done) })
}

// Close ends streams and drops idle executor connections. Sandboxes keep
// running; the backend stays open (its owner closes it).
func (s *Server) Close() {
	s.Shutdown()
	s.closed.Do(s.proxy.close)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Version: version.Version})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI)
}

// notFound answers requests no route matched: 405 when the path exists
// with another method, else 404, both as JSON errors.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := s.mux.Handler(probe); pat != "" && pat != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, api.CodeMethod, fmt.Sprintf("%s is not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}
