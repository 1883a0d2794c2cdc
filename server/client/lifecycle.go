package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

func (c *Client) change(ctx context.Context, ref, op string, in any) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/"+op), in, &sb)
}

// Pause freezes every process of a sandbox.
func (c *Client) Pause(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "pause", nil)
}

// Resume thaws a paused sandbox.
func (c *Client) Resume(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "resume", nil)
}

// Start starts a stopped sandbox again.
func (c *Client) Start(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "start", nil)
}

// Stop sends o.Signal (SIGTERM) to the sandbox's PID 1 and SIGKILL after
// o.Timeout (the server's default when zero).
func (c *Client) Stop(ctx context.Context, ref string, o sbx.StopOptions) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "stop", api.StopRequest{Timeout: sbx.Duration(o.Timeout), Signal: o.Signal, Checkpoint: o.Checkpoint})
}

// Remove removes a sandbox; without o.Force a running one is refused
// (sbx.ErrState).
func (c *Client) Remove(ctx context.Context, ref string, o sbx.RemoveOptions) error {
	return c.Call(ctx, http.MethodDelete, sandboxURL(ref, "?force="+strconv.FormatBool(o.Force)), nil, nil)
}
