package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// The sandbox routes: decode the request, call the backend, encode the
// reply. Policy (host paths, host network, privileges) is the backend's.

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

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var f sbx.Filter
	q := r.URL.Query()
	for _, l := range q["label"] {
		if err := f.ParseLabel(l); err != nil {
			s.fail(w, badRequest("label filter %q: want key=value", l))
			return
		}
	}
	f.Status = sbx.Status(q.Get("status"))
	f.Name = q.Get("name")
	for name, dst := range map[string]*bool{"running": &f.Running, "pooled": &f.Pooled} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				s.fail(w, badRequest("%s=%q: want true or false", name, v))
				return
			}
			*dst = b
		}
	}
	list, err := s.b.List(r.Context(), f)
	if err != nil {
		s.fail(w, err)
		return
	}
	if list == nil {
		list = []*sbx.Sandbox{}
	}
	writeJSON(w, http.StatusOK, api.SandboxList{Sandboxes: list})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.b.Inspect(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) removeSandbox(w http.ResponseWriter, r *http.Request) {
	force := true
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, badRequest("force=%q: want true or false", v))
			return
		}
		force = b
	}
	if err := s.b.Remove(r.Context(), r.PathValue("id"), sbx.RemoveOptions{Force: force}); err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// stateChange runs one operation that returns the new record.
func (s *Server) stateChange(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, ref string) (*sbx.Sandbox, error)) {
	sb, err := op(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) { s.stateChange(w, r, s.b.Pause) }
func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	s.stateChange(w, r, s.b.Resume)
}
func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) { s.stateChange(w, r, s.b.Start) }

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	if err := s.decodeJSON(w, r, &req, true); err != nil {
		s.fail(w, err)
		return
	}
	s.stateChange(w, r, func(ctx context.Context, ref string) (*sbx.Sandbox, error) {
		return s.b.Stop(ctx, ref, sbx.StopOptions{Timeout: time.Duration(req.Timeout), Signal: req.Signal})
	})
}

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

func (s *Server) sandboxStats(w http.ResponseWriter, r *http.Request) {
	u, err := s.b.Stats(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// hostInfo is GET /v1/info: the facts of the backend's host.
func (s *Server) hostInfo(w http.ResponseWriter, r *http.Request) {
	info, err := s.b.Info(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

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
