package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sbxrun/sbx"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var opts sbx.Options
	if err := s.decodeJSON(w, r, &opts, false); err != nil {
		s.fail(w, err)
		return
	}
	release, err := s.admitCreate()
	if err != nil {
		s.fail(w, err)
		return
	}
	defer release()
	start := time.Now()
	sb, err := s.b.Create(r.Context(), opts)
	if err != nil {
		s.metrics.creates.Inc("error")
		s.fail(w, err)
		return
	}
	s.metrics.createSeconds.Observe(time.Since(start).Seconds())
	s.metrics.creates.Inc("ok")
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	writeJSON(w, http.StatusCreated, sb)
}

// admitCreate takes one of the MaxConcurrentCreates slots, or fails with
// 429 when none is free.
func (s *Server) admitCreate() (release func(), err error) {
	select {
	case s.creates <- struct{}{}:
		return func() { <-s.creates }, nil
	default:
		return nil, fmt.Errorf("%w: %d creates are in flight, the server's maximum (sbx serve --max-concurrent-creates); retry", sbx.ErrLimit, s.cfg.MaxConcurrentCreates)
	}
}
