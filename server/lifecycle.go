package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// The sandbox routes: decode the request, call the backend, encode the
// reply. Policy (host paths, host network, privileges) is the backend's.

func (s *Server) removeSandbox(w http.ResponseWriter, r *http.Request) {
	force := true
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, badRequest("force=%q: want true or false", v))
			return
		}
		force = b
	}
	if err := s.b.Remove(r.Context(), r.PathValue("id"), sbx.RemoveOptions{Force: force}); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// stateChange runs one operation that returns the new record.
func (s *Server) stateChange(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, ref string) (*sbx.Sandbox, error)) {
	sb, err := op(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) { s.stateChange(w, r, s.b.Pause) }
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	s.stateChange(w, r, s.b.Resume)
}
func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) { s.stateChange(w, r, s.b.Start) }

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	if err := s.decodeJSON(w, r, &req, true); err != nil {
		s.fail(w, err)
		return
	}
	s.stateChange(w, r, func(ctx context.Context, ref string) (*sbx.Sandbox, error) {
		return s.b.Stop(ctx, ref, sbx.StopOptions{Timeout: time.Duration(req.Timeout), Signal: req.Signal, Checkpoint: req.Checkpoint})
	})
}
