package server

import (
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// topSandbox is GET /v1/sandboxes/{id}/top.
func (s *Server) topSandbox(w http.ResponseWriter, r *http.Request) {
	ps, err := s.b.Top(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if ps == nil {
		ps = []sbx.ProcessInfo{}
	}
	writeJSON(w, http.StatusOK, api.ProcessList{Processes: ps})
}
