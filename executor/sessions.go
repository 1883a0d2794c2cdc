package executor

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/proc"
	"github.com/sbxrun/sbx/executor/internal/shell"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.SessionRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	s.mu.Lock()
	switch {
	case s.stopping:
		s.mu.Unlock()
		s.fail(w, errStopping)
		return
	case len(s.sessions) >= s.cfg.MaxSessions:
		s.mu.Unlock()
		writeError(w, http.StatusTooManyRequests, api.CodeLimit, fmt.Sprintf("%d sessions are open; delete one first", len(s.sessions)))
		return
	}
	s.mu.Unlock()
	ra, err := s.resolveRun(req.User, req.Cwd)
	if err != nil {
		s.fail(w, err)
		return
	}
	id, cred, dir := ra.id, ra.cred, ra.dir
	env := proc.BuildEnv(s.env(), req.Env, id)
	// A dumb terminal: no colours, no cursor games, no pagers waiting for
	// a key.
	env = proc.BuildEnv(env, withDefaults(req.Env, map[string]string{"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}), id)
	argv, err := shellArgv(req.Shell, env, dir)
	if err != nil {
		s.fail(w, err)
		return
	}
	scratch, err := s.sessionScratch()
	if err != nil {
		s.fail(w, err)
		return
	}
	sid := newID()
	ss, err := shell.New(r.Context(), s.sup, sid, shell.Options{
		Argv:       argv,
		Env:        env,
		Dir:        dir,
		User:       id,
		Credential: cred,
		ScratchDir: filepath.Join(scratch, sid),
		Budget:     s.outBudget,
	})
	if err != nil {
		s.fail(w, fmt.Errorf("start session: %w", err))
		return
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		ss.Close()
		s.fail(w, errStopping)
		return
	}
	s.sessions[sid] = ss
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, ss.Info())
}

// withDefaults returns defaults overridden by the keys of explicit.
func withDefaults(explicit, defaults map[string]string) map[string]string {
	out := make(map[string]string, len(defaults))
	for k, v := range defaults {
		if _, ok := explicit[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// shellArgv resolves a session's shell: bash when it exists and no shell is
// asked for, sh otherwise.
func shellArgv(spec string, env []string, dir string) ([]string, error) {
	argv := strings.Fields(spec)
	if len(argv) == 0 {
		for _, name := range []string{"bash", "sh", "/bin/sh"} {
			if p, err := proc.LookPath(name, env, dir); err == nil {
				return []string{p}, nil
			}
		}
		return nil, badRequest("no shell found: neither bash nor sh is in PATH, and /bin/sh is missing")
	}
	p, err := proc.LookPath(argv[0], env, dir)
	if err != nil {
		return nil, badRequest("shell %q: %v", argv[0], err)
	}
	argv[0] = p
	return argv, nil
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) *shell.Session {
	id := r.PathValue("id")
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no session %q", id))
	}
	return ss
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := api.SessionList{Sessions: make([]api.Session, 0, len(s.sessions))}
	all := make([]*shell.Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		all = append(all, ss)
	}
	s.mu.Unlock()
	for _, ss := range all {
		list.Sessions = append(list.Sessions, ss.Info())
	}
	sort.Slice(list.Sessions, func(i, j int) bool { return list.Sessions[i].ID < list.Sessions[j].ID })
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	ss := s.session(w, r)
	if ss == nil {
		return
	}
	s.mu.Lock()
	delete(s.sessions, ss.ID)
	s.mu.Unlock()
	ss.Close()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) runSession(w http.ResponseWriter, r *http.Request) {
	ss := s.session(w, r)
	if ss == nil {
		return
	}
	var req api.RunRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	if req.TimeoutS < 0 || req.NoOutputTimeoutS != nil && *req.NoOutputTimeoutS < 0 {
		s.fail(w, badRequest("timeouts must not be negative"))
		return
	}
	stop, err := sessionStop(req)
	if err != nil {
		s.fail(w, err)
		return
	}
	if s.isStopping() {
		s.fail(w, errStopping)
		return
	}
	res, err := ss.Run(r.Context(), req, stop)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
