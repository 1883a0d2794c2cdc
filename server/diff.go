package server

import (
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// diffSandbox is GET /v1/sandboxes/{id}/diff.
func (s *Server) diffSandbox(w http.ResponseWriter, r *http.Request) {
	changes, err := s.b.Diff(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if changes == nil {
		changes = []sbx.Change{}
	}
	writeJSON(w, http.StatusOK, api.ChangeList{Changes: changes})
}
