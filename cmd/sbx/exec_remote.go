package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
)

// remoteAttach is `sbx exec -i/-t` and `sbx shell` with --host: the
// command runs through the executor's attach endpoint, reached through a
// tunnel of the server, with the local terminal in raw mode (with -i) and
// its size followed.
func remoteAttach(ctx context.Context, cmd *cobra.Command, b sandboxBackend, ref string, req execapi.AttachRequest, interactive bool, timeout time.Duration) error {
	if timeout > 0 {
		req.TimeoutS = timeout.Seconds()
	}
	// Resolve the sandbox first, so a missing one exits like locally.
	sb, err := b.Get(ctx, ref)
	if err != nil {
		return sbxError(err)
	}
	res, err := attachRemote(ctx, cmd, b, sb.ID, req, interactive)
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

// attachRemote runs req attached to the sandbox id's executor, through a
// tunnel: stdin (with interactive) and the terminal size go there, the
// output comes back, until the command exits or ctx ends.
func attachRemote(ctx context.Context, cmd *cobra.Command, b sandboxBackend, id string, req execapi.AttachRequest, interactive bool) (execapi.ExecResult, error) {
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
	var resize chan [2]uint16
	if req.Tty {
		restore, size, ch := setupTerminal(interactive)
		defer restore()
		req.Cols, req.Rows, resize = size[0], size[1], ch
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := ex.Attach(actx, req)
	if err != nil {
		return execapi.ExecResult{}, err
	}
	defer a.Close()
	if resize != nil {
		go func() {
			for {
				select {
				case <-actx.Done():
					return
				case s := <-resize:
					_ = a.Resize(s[0], s[1])
				}
			}
		}()
	}
	if interactive {
		go func() {
			_, err := io.Copy(a, cmd.InOrStdin())
			if err == nil && !req.Tty {
				_ = a.CloseStdin()
			}
		}()
	} else if !req.Tty {
		_ = a.CloseStdin()
	}
	return a.Wait(cmd.OutOrStdout(), cmd.ErrOrStderr())
}
