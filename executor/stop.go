package executor

import (
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/proc"
	"github.com/sbxrun/sbx/executor/internal/shell"
	"golang.org/x/sys/unix"
)

// sessionStop is how a session's command is stopped at the timeout of a
// run request or when its caller goes away: not at all without a
// stop_signal, else that signal, SIGKILL stop_grace
// (sbx.DefaultExecStopGrace) later.
func sessionStop(req api.RunRequest) (shell.Stop, error) {
	if req.StopSignal == "" {
		if req.StopGrace != 0 {
			return shell.Stop{}, badRequest("stop_grace needs a stop_signal")
		}
		return shell.Stop{}, nil
	}
	sig, err := parseSignal(req.StopSignal)
	if err != nil {
		return shell.Stop{}, err
	}
	grace := time.Duration(req.StopGrace)
	switch {
	case grace < 0:
		return shell.Stop{}, badRequest("stop_grace must not be negative")
	case grace == 0:
		grace = sbx.DefaultExecStopGrace
	}
	return shell.Stop{Signal: sig, Grace: grace}, nil
}

// execLimits are the limits of an exec request: its timeout, and how its
// process group is stopped at the timeout or when cancel closes (the caller
// went away): req.StopSignal (SIGTERM), then SIGKILL req.StopGrace
// (sbx.DefaultExecStopGrace) later.
func execLimits(req api.ExecRequest, cancel <-chan struct{}) (proc.Limits, error) {
	lim := proc.Limits{Timeout: min(req.Timeout, proc.MaxTimeout), Cancel: cancel, StopSignal: unix.SIGTERM, StopGrace: req.StopGrace}
	if req.StopSignal != "" {
		sig, err := parseSignal(req.StopSignal)
		if err != nil {
			return proc.Limits{}, err
		}
		lim.StopSignal = sig
	}
	switch {
	case req.StopGrace < 0:
		return proc.Limits{}, badRequest("stop_grace must not be negative")
	case req.StopGrace == 0:
		lim.StopGrace = sbx.DefaultExecStopGrace
	}
	return lim, nil
}
