package client

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	execclient "github.com/sbxrun/sbx/executor/client"
)

// Exec runs a command through the sandbox's executor, reached through a
// tunnel, streaming its output to onOutput when given.
func (c *Client) Exec(ctx context.Context, ref string, req sbx.ExecRequest, onOutput func(sbx.ExecFrame) error) (sbx.ExecResult, error) {
	ex := c.Executor(ref, execclient.Options{})
	defer ex.Close()
	if onOutput == nil {
		return ex.Exec(ctx, req)
	}
	return ex.ExecStream(ctx, req, onOutput)
}

// withExecutor calls fn with a client of the sandbox's executor and the
// sandbox's working directory.
func (c *Client) withExecutor(ctx context.Context, ref string, fn func(*execclient.Client, string) error) error {
	sb, err := c.Get(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Status != sbx.StatusRunning {
		return fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	wd := sb.Options.Workdir
	if wd == "" && sb.Image != nil {
		wd = sb.Image.Workdir
	}
	ex := c.Executor(sb.ID, execclient.Options{})
	defer ex.Close()
	return fn(ex, wd)
}
