package executor

import (
	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/internal/proc"
	"golang.org/x/sys/unix"
)

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
