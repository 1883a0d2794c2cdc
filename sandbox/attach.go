package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
)

// Attach runs an interactive command in a running sandbox. The command is
// started by the sandbox's executor (its attach endpoint), like every
// other command: a child of the sandbox's PID 1 under its seccomp filter,
// capabilities, no_new_privs and cgroups. No host process joins the
// sandbox's namespaces to start it (the way `docker exec` does), so
// nothing the sandbox can reach runs with the host's privileges or without
// the filter. With o.Tty it gets a terminal of its own whose size follows
// o.Resize. Cancelling ctx, or o.Timeout passing (TimedOut set), stops
// the command: o.StopSignal (SIGTERM), SIGKILL o.StopGrace later.
func (h *Host) Attach(ctx context.Context, ref string, o sbx.AttachOptions) (sbx.ExecResult, error) {
	if len(o.Argv) == 0 && o.Command == "" {
		return sbx.ExecResult{}, fmt.Errorf("%w: no command given", sbx.ErrInvalid)
	}
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return sbx.ExecResult{}, err
	}
	defer done()
	c, _ := h.executor(sb)
	defer c.Close()
	oom := h.watchOOM(sb)
	res, err := c.RunAttached(ctx, attachRequest(o), attachIO(o))
	return oom.note(res), err
}

// attachRequest and attachIO split the contract's attach options into the
// executor client's.
func attachRequest(o sbx.AttachOptions) execapi.AttachRequest {
	return execapi.AttachRequest{ExecRequest: o.ExecRequest, Tty: o.Tty, Cols: o.Size[0], Rows: o.Size[1]}
}

func attachIO(o sbx.AttachOptions) client.AttachIO {
	return client.AttachIO{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Resize: o.Resize}
}
