package executor

import (
	"fmt"
	"os"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/proc"
)

// startDetached is exec with detach (docker exec -d): it starts the
// command in a session of its own with no input or output and returns at
// once with its pid. The command runs on after the caller goes, until it
// ends (the supervisor reaps it), timeout_s passes (its process group is
// killed) or the sandbox stops. A command that cannot start gets exit
// code 127 or 126 and the reason on stderr, as exec does, and no pid.
func (s *Server) startDetached(req api.ExecRequest) (api.ExecResult, error) {
	if s.isStopping() {
		return api.ExecResult{}, errStopping
	}
	argv, err := execArgv(req)
	if err != nil {
		return api.ExecResult{}, err
	}
	if req.Stdin != "" {
		return api.ExecResult{}, badRequest("stdin does not go with detach: the command runs with no input")
	}
	lim, err := execLimits(req, nil)
	if err != nil {
		return api.ExecResult{}, err
	}
	ra, err := s.resolveRun(req.User, req.Cwd)
	if err != nil {
		return api.ExecResult{}, err
	}
	start := time.Now()
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return api.ExecResult{}, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	p, err := s.sup.Launch(proc.Command{
		Argv:  argv,
		Dir:   ra.dir,
		Env:   proc.BuildEnv(s.env(), requestEnv(req.Env), ra.id),
		Cred:  ra.cred,
		Stdio: [3]*os.File{s.devNull, out, out},
		Group: proc.OwnSession,
		Close: []*os.File{out},
	})
	if err != nil {
		return api.ExecResult{ExitCode: startCode(err), Stderr: fmt.Sprintf("sbx: %v\n", err), DurationS: time.Since(start).Seconds()}, nil
	}
	if req.Timeout > 0 {
		go s.sup.Wait(p, nil, lim)
	}
	return api.ExecResult{Pid: p.Pid, DurationS: time.Since(start).Seconds()}, nil
}

// execArgv is the argv of an exec request (argv, or command run with
// /bin/sh -c), its timeout checked.
func execArgv(req api.ExecRequest) ([]string, error) {
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		return nil, badRequest("give either argv or command, not both")
	case req.Timeout < 0:
		return nil, badRequest("timeout_s must not be negative")
	case req.Command != "":
		return []string{"/bin/sh", "-c", req.Command}, nil
	case len(req.Argv) == 0:
		return nil, badRequest("argv or command is required")
	}
	return req.Argv, nil
}
