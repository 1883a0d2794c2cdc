package executor

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/sbxrun/sbx/executor/internal/proc"
)

// identity resolves a request's user, the default when empty.
func (s *Server) identity(spec string) (proc.Identity, error) {
	if spec == "" {
		return s.defaults.Load().user, nil
	}
	u, err := proc.LookupUser(spec)
	if err != nil {
		return proc.Identity{}, badRequest("%v", err)
	}
	return u, nil
}

// runAs is who a command runs as and where.
type runAs struct {
	id   proc.Identity
	cred *syscall.Credential
	dir  string
}

// resolveRun resolves a request's user and working directory (the
// defaults when empty).
func (s *Server) resolveRun(user, cwd string) (runAs, error) {
	id, err := s.identity(user)
	if err != nil {
		return runAs{}, err
	}
	cred, err := id.Credential()
	if err != nil {
		return runAs{}, badRequest("%v", err)
	}
	dir, err := s.workdir(cwd)
	if err != nil {
		return runAs{}, err
	}
	return runAs{id: id, cred: cred, dir: dir}, nil
}

// workdir resolves a request's working directory and checks it exists.
func (s *Server) workdir(cwd string) (string, error) {
	if cwd == "" {
		cwd = s.defaultWorkdir()
	} else if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(s.defaultWorkdir(), cwd)
	}
	fi, err := os.Stat(cwd)
	if err != nil || !fi.IsDir() {
		return "", badRequest("working directory %s does not exist or is not a directory", cwd)
	}
	return cwd, nil
}
