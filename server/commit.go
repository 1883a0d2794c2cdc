package server

import (
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// commitSandbox stores the sandbox's writable layer as a new image in the
// server's image cache; a running sandbox is paused meanwhile.
func (s *Server) commitSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CommitRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if req.Name == "" {
		s.fail(w, fmt.Errorf("%w: name is required: the name of the new image", sbx.ErrInvalid))
		return
	}
	img, err := s.b.Commit(r.Context(), r.PathValue("id"), req.Name)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, img)
}
