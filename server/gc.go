package server

import (
	"net/http"
)

// gc is POST /v1/gc: the backend's garbage collection (expired sandboxes,
// interrupted creates and removes, crashed runs, orphaned runtime state).
func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	rep, err := s.b.GC(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
