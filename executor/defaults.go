package executor

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/fileops"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// defaults are what commands get when a request names no environment,
// working directory or user. They are fixed at start (Config), and
// replaced once more when a warm pool's member is claimed (PUT
// /v1/defaults): the member started before the sandbox's env, working
// directory and user were known.
type defaults struct {
	env     []string
	workdir string
	// user is who commands run as, userSpec how it was asked for ("":
	// the executor's own user).
	user     proc.Identity
	userSpec string
	files    *fileops.Files
}

// fileHistoryBytes bounds the edit history of the file operations.
const fileHistoryBytes = 64 << 20

func (s *Server) setDefaults(env []string, workdir string, user proc.Identity, userSpec string) {
	s.defaults.Store(&defaults{env: env, workdir: workdir, user: user, userSpec: userSpec,
		files: fileops.New(int(user.UID), int(user.GID), workdir, fileHistoryBytes)})
}

// env is the default environment of commands.
func (s *Server) env() []string { return s.defaults.Load().env }

// defaultWorkdir is the default working directory of commands.
func (s *Server) defaultWorkdir() string { return s.defaults.Load().workdir }

// fileOps are the file operations, relative to the default working
// directory.
func (s *Server) fileOps() *fileops.Files { return s.defaults.Load().files }

// putDefaults replaces the default environment, working directory and
// user of later commands, creating the directory (as the executor's user,
// mode 0755) if it does not exist, as a start with --workdir would have.
// The user is looked up in the sandbox's /etc/passwd and /etc/group as a
// start with --user would (empty: the executor's own). The running
// commands and open sessions keep theirs.
func (s *Server) putDefaults(w http.ResponseWriter, r *http.Request) {
	var req api.Defaults
	if err := decode(w, r, &req); err != nil {
		s.fail(w, err)
		return
	}
	wd := req.Workdir
	if wd == "" {
		wd = "/"
	}
	if !filepath.IsAbs(wd) {
		s.fail(w, badRequest("working directory %q must be absolute", wd))
		return
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			s.fail(w, badRequest("environment entry %q: want KEY=VALUE", kv))
			return
		}
	}
	user := proc.Current()
	if req.User != "" {
		u, err := proc.LookupUser(req.User)
		if err == nil {
			_, err = u.Credential()
		}
		if err != nil {
			s.fail(w, badRequest("default user: %v", err))
			return
		}
		user = u
	}
	if err := os.MkdirAll(wd, 0o755); err != nil {
		s.fail(w, badRequest("working directory %s: %v", wd, err))
		return
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		s.fail(w, badRequest("working directory %s is not a directory", wd))
		return
	}
	s.setDefaults(append([]string(nil), req.Env...), filepath.Clean(wd), user, req.User)
	d := s.defaults.Load()
	writeJSON(w, http.StatusOK, api.Defaults{Env: d.env, Workdir: d.workdir, User: d.userSpec})
}
