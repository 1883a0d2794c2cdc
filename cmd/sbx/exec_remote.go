package main

import (
	"context"
	"errors"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
)

// executorAttach is `sbx exec -i/-t` and `sbx shell`: the command runs
// through the executor's attach endpoint (reached through a tunnel of the
// server with --host), so it is a child of the sandbox's PID 1 under its
// seccomp filter, capabilities and cgroups, and no host process enters
// the sandbox. The local terminal is in raw mode (with -i) and its size
// followed.
func executorAttach(ctx context.Context, cmd *cobra.Command, b sandboxBackend, ref string, req execapi.AttachRequest, interactive bool, timeout time.Duration) error {
	if timeout > 0 {
		req.TimeoutS = timeout.Seconds()
	}
	// Resolve the sandbox first, so a missing one exits like locally.
	sb, err := b.Get(ctx, ref)
	if err != nil {
		return sbxError(err)
	}
	res, err := attachExecutor(ctx, cmd, b, sb.ID, req, interactive)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return &exitError{code: exitSbxFailed, msg: "interrupted"}
		}
		return sbxError(remoteErr(err))
	}
	if res.TimedOut {
		return exitWith(exitTimeout)
	}
	return exitWith(res.ExitCode)
}

// attachExecutor runs req attached to the sandbox id's executor, through a
// tunnel: stdin (with interactive) and the terminal size go there, the
// output comes back, until the command exits or ctx ends.
func attachExecutor(ctx context.Context, cmd *cobra.Command, b sandboxBackend, id string, req execapi.AttachRequest, interactive bool) (execapi.ExecResult, error) {
	if req.Tty {
		if t := os.Getenv("TERM"); t != "" {
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			if _, ok := req.Env["TERM"]; !ok {
				req.Env["TERM"] = t
			}
		}
	}
	ex := execclient.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return b.Dial(ctx, id) }, execclient.Options{})
	defer ex.Close()
	stdio := execclient.AttachIO{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	if req.Tty {
		restore, size, ch := setupTerminal(interactive)
		defer restore()
		req.Cols, req.Rows, stdio.Resize = size[0], size[1], ch
	}
	if interactive {
		stdio.Stdin = cmd.InOrStdin()
	}
	return ex.RunAttached(ctx, req, stdio)
}
