package client

import (
	"context"
	"fmt"
	"net"

	"github.com/sbxrun/sbx"
)

// The main command's operations and DialPort get REST routes with issue
// 13; until then they say so.

// Logs returns the output of the sandbox's main command.
func (c *Client) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	return notYet("logs")
}

// Wait waits until the sandbox's main command has ended for good.
func (c *Client) Wait(ctx context.Context, ref string) (*sbx.Exit, error) {
	return nil, notYet("wait")
}

// Signal sends a signal to the sandbox's main command.
func (c *Client) Signal(ctx context.Context, ref, signal string) error {
	return notYet("signal")
}

// DialPort connects to a TCP port inside the sandbox's network.
func (c *Client) DialPort(ctx context.Context, ref string, port int) (net.Conn, error) {
	return nil, notYet("port dialing")
}

func notYet(what string) error {
	return fmt.Errorf("%w: %s through a server is not built yet (issue 13)", sbx.ErrUnsupported, what)
}
