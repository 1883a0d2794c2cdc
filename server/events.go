package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// streamEvents serves GET /v1/events as server-sent events from the
// backend's Events. Each event's id is its sequence number; Last-Event-ID
// (or ?since=N) replays the buffered events after N, behind a reset event
// when N is unknown (a restarted server).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	var since uint64
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("since")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.fail(w, badRequest("event id %q: want a sequence number", v))
			return
		}
		if since = n; n == 0 {
			since = sbx.EventsBuffered
		}
	}
	// A live stream starts at the backend's latest event, resolved before
	// the response begins: a client that creates a sandbox as soon as the
	// stream is open sees its events, even if the subscription below is
	// made after the headers went out.
	if since == 0 {
		if s.cfg.Background != nil {
			since = s.cfg.Background.LastEventSeq()
		}
	}
	ctx, cancel := s.untilShutdown(r.Context())
	defer cancel()
	// The backend calls deliver from its own goroutine; the handler
	// writes, so that heartbeats and events never interleave.
	events := make(chan sbx.Event, 64)
	ended := make(chan error, 1)
	go func() {
		ended <- s.b.Events(ctx, since, func(e sbx.Event) error {
			select {
			case events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", api.ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": sbx events\n\n")
	if rc.Flush() != nil {
		return
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case e := <-events:
			data, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data); err != nil {
				return
			}
			if len(events) > 0 {
				continue // flush once the burst is written
			}
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case <-ended:
			// Too slow, or the backend closed: the client reconnects
			// with Last-Event-ID. Deliver what was queued first.
			for len(events) > 0 {
				e := <-events
				data, _ := json.Marshal(e)
				_, _ = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data)
			}
			_ = rc.Flush()
			return
		case <-ctx.Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}
