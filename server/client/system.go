package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
)

// DiskUsage says what the server's images, layers and sandboxes hold.
func (c *Client) DiskUsage(ctx context.Context) (*sbx.DiskUsage, error) {
	var du sbx.DiskUsage
	return &du, c.Call(ctx, http.MethodGet, "/v1/system/df", nil, &du)
}

// Prune removes the server's exited sandboxes, (o.All) unused images and
// unused layers.
func (c *Client) Prune(ctx context.Context, o sbx.PruneOptions) (*sbx.PruneReport, error) {
	var rep sbx.PruneReport
	return &rep, c.Call(ctx, http.MethodPost, "/v1/system/prune", o, &rep)
}
