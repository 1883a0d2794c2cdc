package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
)

// Dial opens a tunnel to the sandbox's executor (DialExecutor).
func (c *Client) Dial(ctx context.Context, ref string) (net.Conn, error) {
	return c.DialExecutor(ctx, ref)
}

// DialExecutor opens a tunnel to the executor of sandbox ref (GET
// /v1/sandboxes/{id}/connect with Upgrade: sbx-executor) and returns a
// connection that speaks the executor's own HTTP API, e.g. for
// executor/client.NewWithDialer. ctx bounds only the dial and the
// upgrade.
func (c *Client) DialExecutor(ctx context.Context, ref string) (net.Conn, error) {
	return c.upgrade(ctx, sandboxURL(ref, "/connect"), "sbx-executor")
}

// DialPort opens a tunnel to TCP port on the loopback of sandbox ref, as
// a port-forward does (GET /v1/sandboxes/{id}/ports/{port}/connect with
// Upgrade: sbx-port): the server connects from inside the sandbox's
// network namespace. ctx bounds only the dial and the upgrade.
func (c *Client) DialPort(ctx context.Context, ref string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d is out of range (1-65535)", sbx.ErrInvalid, port)
	}
	return c.upgrade(ctx, sandboxURL(ref, "/ports/"+strconv.Itoa(port)+"/connect"), "sbx-port")
}

// upgrade opens a tunnel: GET path with Upgrade: token, then the raw
// connection.
func (c *Client) upgrade(ctx context.Context, path, token string) (net.Conn, error) {
	conn, err := c.dialRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("sbx server %s: %w", c.host, err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", token)
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sbx server: open tunnel: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sbx server: open tunnel: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the upgrade reply's reader already buffered
// before reading the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
