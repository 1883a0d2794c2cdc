package server

import (
	"net/http"
)

// hostInfo is GET /v1/info: the facts of the backend's host.
func (s *Server) hostInfo(w http.ResponseWriter, r *http.Request) {
	info, err := s.b.Info(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
