package server

import (
	"net/http"

	"github.com/sbxrun/sbx"
)

// diskUsage is GET /v1/system/df.
func (s *Server) diskUsage(w http.ResponseWriter, r *http.Request) {
	du, err := s.b.DiskUsage(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, du)
}

// prune is POST /v1/system/prune {"all"}: exited sandboxes, then (all)
// unused images, then unused layers.
func (s *Server) prune(w http.ResponseWriter, r *http.Request) {
	var req sbx.PruneOptions
	if err := s.decodeJSON(w, r, &req, true); err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.b.Prune(r.Context(), req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
