package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sbxrun/sbx"
)

// Create creates a sandbox on the server and returns it once its executor
// answers (POST /v1/sandboxes). Host mode (neither Image nor Rootfs) needs
// the server's own host: sbx.ErrUnsupported.
func (c *Client) Create(ctx context.Context, opts sbx.Options) (*sbx.Sandbox, error) {
	if opts.Image == "" && opts.Rootfs == "" {
		return nil, fmt.Errorf("%w: host mode needs this host; against a server give an image or a rootfs (a directory on the server)", sbx.ErrUnsupported)
	}
	var sb sbx.Sandbox
	if err := c.Call(ctx, http.MethodPost, "/v1/sandboxes", opts, &sb); err != nil {
		return nil, err
	}
	if opts.Lease > 0 {
		// The client owns the sandbox: it renews the lease until the
		// sandbox is removed or the client closes (or its process dies).
		go sbx.KeepLease(c.leases, c, sb.ID, opts.Lease)
	}
	return &sb, nil
}
