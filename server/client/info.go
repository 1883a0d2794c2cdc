package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
)

// Info returns the facts of the server's host.
func (c *Client) Info(ctx context.Context) (*sbx.HostInfo, error) {
	var info sbx.HostInfo
	return &info, c.Call(ctx, http.MethodGet, "/v1/info", nil, &info)
}
