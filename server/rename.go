package server

import (
	"net/http"

	"github.com/sbxrun/sbx"

	"github.com/sbxrun/sbx/server/api"
)

// renewSandbox is POST /v1/sandboxes/{id}/renew.
func (s *Server) renewSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.b.Renew(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

// setEgress is POST /v1/sandboxes/{id}/egress.
func (s *Server) setEgress(w http.ResponseWriter, r *http.Request) {
	var req sbx.EgressUpdate
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	sb, err := s.b.SetEgress(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

// renameSandbox is POST /v1/sandboxes/{id}/rename.
func (s *Server) renameSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.RenameRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	sb, err := s.b.Rename(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}
