package client

import (
	"context"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
)

// Attach runs an interactive command through the executor's attach
// endpoint, reached through a tunnel. The sandbox is resolved first, so a
// missing one fails as it does locally.
func (c *Client) Attach(ctx context.Context, ref string, o sbx.AttachOptions) (sbx.ExecResult, error) {
	sb, err := c.Get(ctx, ref)
	if err != nil {
		return sbx.ExecResult{}, err
	}
	ex := c.Executor(sb.ID, execclient.Options{})
	defer ex.Close()
	return ex.RunAttached(ctx, execapi.AttachRequest{ExecRequest: o.ExecRequest, Tty: o.Tty, Cols: o.Size[0], Rows: o.Size[1]},
		execclient.AttachIO{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Resize: o.Resize})
}
