package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// sandboxLogs serves GET /v1/sandboxes/{id}/logs: the main command's
// output as NDJSON sbx.LogFrames, the last of type "end" (its offset is
// where to resume). Query: since=OFFSET, tail=BYTES, follow=1. A stream
// that stops without an end frame was cut short.
func (s *Server) sandboxLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o sbx.LogOptions
	for _, p := range []struct {
		name string
		v    *int64
	}{{"since", &o.Since}, {"tail", &o.Tail}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				s.fail(w, badRequest("%s=%q: want a byte offset (0 or more)", p.name, v))
				return
			}
			*p.v = n
		}
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, badRequest("follow=%q: want true or false", v))
			return
		}
		o.Follow = b
	}
	ctx, cancel := s.untilShutdown(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	started := false
	err := s.b.Logs(ctx, r.PathValue("id"), o, func(f sbx.LogFrame) error {
		if !started {
			w.Header().Set("Content-Type", api.ContentTypeNDJSON)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		data, err := json.Marshal(f)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(data, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && !started {
		s.fail(w, err)
		return
	}
	if err != nil {
		s.log.Debug("logs stream ended early", "id", r.PathValue("id"), "err", err)
	}
}

// waitSandbox serves POST /v1/sandboxes/{id}/wait: it answers with the
// main command's sbx.Exit once the command has ended for good.
func (s *Server) waitSandbox(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.untilShutdown(r.Context())
	defer cancel()
	exit, err := s.b.Wait(ctx, r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, exit)
}

// signalSandbox serves POST /v1/sandboxes/{id}/signal: a SignalRequest
// to the main command's process group.
func (s *Server) signalSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.SignalRequest
	if err := s.decodeJSON(w, r, &req, false); err != nil {
		s.fail(w, err)
		return
	}
	if err := s.b.Signal(r.Context(), r.PathValue("id"), req.Signal); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// untilShutdown returns a context of parent that also ends when the
// server shuts down, for handlers that stream or wait for long.
func (s *Server) untilShutdown(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
