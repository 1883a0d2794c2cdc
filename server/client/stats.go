package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
)

// Stats returns what a sandbox uses now.
func (c *Client) Stats(ctx context.Context, ref string) (*sbx.Usage, error) {
	var u sbx.Usage
	return &u, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/stats"), nil, &u)
}
