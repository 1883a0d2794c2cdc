package client

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	execclient "github.com/sbxrun/sbx/executor/client"
)

// CopyTo copies src on this machine into the sandbox at dst (relative to
// the sandbox's working directory), through its executor.
func (c *Client) CopyTo(ctx context.Context, ref, src, dst string) error {
	return c.withExecutor(ctx, ref, func(ex *execclient.Client, wd string) error {
		return execclient.CopyTo(ctx, ex, src, execclient.InDir(wd, dst))
	})
}

// CopyFrom copies src in the sandbox (relative to its working directory)
// to dst on this machine, through its executor.
func (c *Client) CopyFrom(ctx context.Context, ref, src, dst string) error {
	if src == "" {
		return fmt.Errorf("%w: empty sandbox path", sbx.ErrInvalid)
	}
	return c.withExecutor(ctx, ref, func(ex *execclient.Client, wd string) error {
		return execclient.CopyFrom(ctx, ex, execclient.InDir(wd, src), dst)
	})
}
