package openhands

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
)

// apiError is an error with the HTTP status it is answered with.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(msg string) error { return &apiError{http.StatusBadRequest, msg} }

func notFound(msg string) error { return &apiError{http.StatusNotFound, msg} }

func conflict(msg string) error { return &apiError{http.StatusConflict, msg} }

// watch follows a running runtime's Agent Server: when its command ends,
// or its sandbox goes away, the runtime becomes an error with the logs.
// It waits on the executor (no polling) outside the lock, so a stuck or
// hostile executor delays nothing else.
func (s *Service) watch(rt *runtime) {
	s.mu.Lock()
	ex, id := rt.exec, rt.SandboxID
	s.mu.Unlock()
	if ex == nil {
		return
	}
	s.launchWatch(rt, func(ctx context.Context) {
		for ctx.Err() == nil {
			st, err := ex.WaitMainCmd(ctx)
			if ctx.Err() != nil {
				return
			}
			if err == nil && st.State == execapi.MainCmdExited {
				logs := s.logTail(ctx, ex)
				s.update(rt, func() {
					if rt.Status == StatusRunning || rt.Status == StatusPaused {
						rt.Restarts = st.Restarts
						rt.fail(PodFailed, exitDetail(st), logs)
					}
				})
				return
			}
			gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, gerr := s.be.Get(gctx, id)
			cancel()
			if errors.Is(gerr, sbx.ErrNotFound) {
				s.update(rt, func() {
					if rt.Status == StatusRunning || rt.Status == StatusPaused {
						rt.fail(PodNotFound, "the sandbox is gone (removed outside the Runtime API)", "")
					}
				})
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
}

// expireLocked forgets tombstones older than the TTL. Called with s.mu
// held.
func (s *Service) expireLocked() {
	for _, rt := range s.byID {
		if rt.Status == StatusStopped && !rt.Ended.IsZero() && time.Since(rt.Ended) > s.cfg.TombstoneTTL {
			s.forget(rt)
		}
	}
}

// Session returns the runtime of a session (404 only when unknown).
func (s *Service) Session(session string) (Runtime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.bySess[session]
	s.expireLocked()
	if rt == nil || s.bySess[session] == nil {
		return Runtime{}, notFound("no runtime for session " + session)
	}
	return s.object(rt), nil
}

// Batch returns the runtimes of the sessions it knows, in the order asked.
func (s *Service) Batch(sessions []string) []Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	out := []Runtime{}
	seen := map[string]bool{}
	for _, id := range sessions {
		rt := s.bySess[id]
		if rt == nil || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, s.object(rt))
	}
	return out
}

// List returns the active runtimes (starting and running), oldest first.
func (s *Service) List() []Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	var rts []*runtime
	for _, rt := range s.byID {
		if rt.Status == StatusStarting || rt.Status == StatusRunning {
			rts = append(rts, rt)
		}
	}
	sort.Slice(rts, func(i, j int) bool { return rts[i].Created.Before(rts[j].Created) })
	out := []Runtime{}
	for _, rt := range rts {
		out = append(out, s.object(rt))
	}
	return out
}

// lookup returns a runtime by id. Called with s.mu held.
func (s *Service) lookup(id string) (*runtime, error) {
	s.expireLocked()
	rt := s.byID[id]
	if rt == nil {
		return nil, notFound("no runtime " + id)
	}
	return rt, nil
}

// withRuntime runs op on runtime id under the lock.
func (s *Service) withRuntime(id string, op func(rt *runtime) (Runtime, error)) (Runtime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, err := s.lookup(id)
	if err != nil {
		return Runtime{}, err
	}
	return op(rt)
}

// Pause freezes a running runtime's sandbox; its key stays valid.
func (s *Service) Pause(ctx context.Context, id string) (Runtime, error) {
	return s.withRuntime(id, func(rt *runtime) (Runtime, error) {
		switch rt.Status {
		case StatusPaused:
			return s.object(rt), nil
		case StatusRunning:
		default:
			return Runtime{}, conflict("runtime " + id + " is " + rt.Status + "; only a running runtime can be paused")
		}
		if _, err := s.be.Pause(ctx, rt.SandboxID); err != nil {
			return Runtime{}, err
		}
		rt.Status, rt.PodStatus = StatusPaused, PodPaused
		s.save(rt)
		s.proxy.CloseIdle()
		return s.object(rt), nil
	})
}

// Resume thaws a paused runtime. By default the key is kept; with
// RotateKeyOnResume the Agent Server restarts with a new one and the
// runtime is starting until it answers again.
func (s *Service) Resume(ctx context.Context, id string) (Runtime, error) {
	return s.withRuntime(id, func(rt *runtime) (Runtime, error) {
		switch rt.Status {
		case StatusRunning, StatusStarting:
			return s.object(rt), nil
		case StatusPaused:
		default:
			return Runtime{}, conflict("runtime " + id + " is " + rt.Status + "; only a paused runtime can be resumed")
		}
		if _, err := s.be.Resume(ctx, rt.SandboxID); err != nil {
			return Runtime{}, err
		}
		rt.Status, rt.PodStatus = StatusRunning, PodReady
		if s.cfg.RotateKeyOnResume {
			// The Agent Server restarts: its exit is not a failure.
			if rt.cancelWatch != nil {
				rt.cancelWatch()
			}
			rt.Key = newID(32)
			rt.Status, rt.PodStatus = StatusStarting, PodPending
			spec := rt.Service
			spec.Env["SESSION_API_KEY"], spec.Env["OH_SESSION_API_KEYS_0"] = rt.Key, rt.Key
			ex := rt.exec
			s.launch(rt, func(ctx context.Context) {
				ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
				defer cancel()
				if _, err := ex.StopMainCmd(ctx, "", 10*time.Second); err == nil {
					_, err = ex.StartMainCmd(ctx, spec)
					if err != nil {
						s.update(rt, func() { rt.fail(PodFailed, "restart with a new key: "+err.Error(), "") })
						return
					}
				}
				s.awaitReady(ctx, rt)
			})
		}
		s.save(rt)
		return s.object(rt), nil
	})
}

// Stop removes a runtime's sandbox and keeps a tombstone (status stopped)
// for TombstoneTTL. Stopping a stopped runtime is not an error.
func (s *Service) Stop(ctx context.Context, id string) (Runtime, error) {
	return s.withRuntime(id, func(rt *runtime) (Runtime, error) {
		if rt.Status == StatusStopped {
			return s.object(rt), nil
		}
		if rt.exec != nil && rt.Status == StatusRunning {
			if logs := s.logTail(ctx, rt.exec); logs != "" {
				rt.Logs = logs
			}
		}
		rt.Detail = ""
		s.retire(rt, "stopped")
		return s.object(rt), nil
	})
}

// proxyTarget returns where the data plane sends a request for runtime id,
// or an error when the runtime cannot take it now.
func (s *Service) proxyTarget(id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, err := s.lookup(id)
	if err != nil {
		return "", err
	}
	switch rt.Status {
	case StatusRunning, StatusStarting:
		if rt.SandboxID != "" {
			return rt.SandboxID, nil
		}
		return "", &apiError{http.StatusServiceUnavailable, "runtime " + id + " is still starting"}
	}
	return "", &apiError{http.StatusServiceUnavailable, "runtime " + id + " is " + rt.Status}
}
