package openhands

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/portproxy"
)

// maxBody caps control-plane request bodies.
const maxBody = 1 << 20

// Handler serves the Runtime API: the control plane at /start, /sessions,
// /list, /pause, /resume and /stop (X-API-Key required), and the data
// plane at /<runtime_id>/... (no authentication of its own).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range s.routes() {
		mux.HandleFunc(pattern, h)
	}
	mux.HandleFunc("/", s.handleData)
	return mux
}

// OpenAPI is the OpenAPI document of the control plane.
//
//go:embed openapi.yaml
var OpenAPI []byte

// routes are the control plane's routes (each in OpenAPI).
func (s *Service) routes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"POST /start":                s.auth(s.handleStart),
		"GET /sessions/batch":        s.auth(s.handleBatch),
		"GET /sessions/{session_id}": s.auth(s.handleSession),
		"GET /list":                  s.auth(s.handleList),
		"POST /pause":                s.auth(s.handleRef(s.Pause)),
		"POST /resume":               s.auth(s.handleRef(s.Resume)),
		"POST /stop":                 s.auth(s.handleRef(s.Stop)),
		"GET /api/warm-runtime-configs": s.auth(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.WarmConfigs(r.Context()))
		}),
		"GET /openapi.yaml": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(OpenAPI)
		},
	}
}

// auth checks X-API-Key against every key in constant time (over
// hashes, so the key's length does not leak either) and passes on the
// key's tenant (tenants.go).
func (s *Service) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := s.matchKey(r.Header.Get("X-API-Key"))
		if tenant == "" {
			writeError(w, http.StatusUnauthorized, "missing or wrong X-API-Key")
			return
		}
		next(w, r.WithContext(withTenant(r.Context(), tenant)))
	}
}

func (s *Service) handleStart(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	req.owner = tenantOf(r)
	rt, err := s.Start(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

func (s *Service) handleSession(w http.ResponseWriter, r *http.Request) {
	rt, err := s.Session(r.PathValue("session_id"))
	if err == nil && !s.visible(tenantOf(r), rt.RuntimeID) {
		err = notFound("no runtime for session " + r.PathValue("session_id"))
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

func (s *Service) handleBatch(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.only(tenantOf(r), s.Batch(r.URL.Query()["ids"])))
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, ListReply{Runtimes: s.only(tenantOf(r), s.List())})
}

// handleRef serves /pause, /resume and /stop.
func (s *Service) handleRef(op func(ctx context.Context, id string) (Runtime, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ref RuntimeRef
		if err := decode(w, r, &ref); err != nil {
			s.fail(w, err)
			return
		}
		if ref.RuntimeID == "" {
			s.fail(w, badRequest("runtime_id is required"))
			return
		}
		if !s.visible(tenantOf(r), ref.RuntimeID) {
			s.fail(w, notFound("no runtime "+ref.RuntimeID))
			return
		}
		rt, err := op(r.Context(), ref.RuntimeID)
		if err != nil {
			s.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rt)
	}
}

// handleData forwards /<runtime_id>/... to the runtime's sandbox:
// /<id>/vscode/..., /<id>/work-1/... and /<id>/work-2/... to their ports,
// everything else to the Agent Server with the prefix cut.
func (s *Service) handleData(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	id, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !strings.HasPrefix(id, "rt-") {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
		return
	}
	s.forward(w, r, id, "/"+rest)
}

// forward sends a request for runtime id to its sandbox; path is what
// follows the runtime's prefix (escaped).
func (s *Service) forward(w http.ResponseWriter, r *http.Request, id, path string) {
	sandboxID, err := s.proxyTarget(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	prefix := ""
	if s.cfg.ListenRuntime == nil {
		prefix = "/" + id
	}
	port := AgentServerPort
	seg, after, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if p, ok := servicePorts[seg]; ok && prefix != "" {
		port, path, prefix = p, "/"+after, prefix+"/"+seg
	}
	s.stripCredentials(r.Header)
	s.proxy.Serve(w, r, portproxy.Target{Sandbox: sandboxID, Port: port, Path: path, Prefix: prefix})
}

// decode reads a JSON body of at most maxBody bytes. Unknown fields are
// accepted: clients send fields sbx does not use.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBody)}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return badRequest("invalid JSON body: " + err.Error())
	}
	return nil
}

// fail answers err with its status and {"detail": ...}.
func (s *Service) fail(w http.ResponseWriter, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.status, ae.msg)
	case errors.Is(err, sbx.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, sbx.ErrState), errors.Is(err, sbx.ErrBusy):
		writeError(w, http.StatusConflict, err.Error())
	default:
		s.log.Warn("openhands: request failed", "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, ErrorReply{Detail: detail})
}
