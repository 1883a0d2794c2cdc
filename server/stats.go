package server

import (
	"net/http"
)

func (s *Server) sandboxStats(w http.ResponseWriter, r *http.Request) {
	u, err := s.b.Stats(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}
