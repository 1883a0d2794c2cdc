package server

import (
	"io"
	"net/http"

	"github.com/sbxrun/sbx/server/api"
)

// exportSandbox is GET /v1/sandboxes/{id}/export: the root as a tar. An
// error before the first byte is a plain error reply; a later one aborts
// the connection, so that a client never takes a short tar for a whole.
func (s *Server) exportSandbox(w http.ResponseWriter, r *http.Request) {
	fw := &firstWrite{w: w, start: func() {
		w.Header().Set("Content-Type", api.ContentTypeTar)
		w.WriteHeader(http.StatusOK)
	}}
	if err := s.b.Export(r.Context(), r.PathValue("id"), fw); err != nil {
		if !fw.started {
			s.fail(w, err)
			return
		}
		s.log.Warn("export", "id", r.PathValue("id"), "err", err)
		panic(http.ErrAbortHandler)
	}
	if !fw.started {
		fw.start()
	}
}

// firstWrite calls start before the first byte goes to w.
type firstWrite struct {
	w       io.Writer
	start   func()
	started bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.started {
		f.started = true
		f.start()
	}
	return f.w.Write(p)
}
