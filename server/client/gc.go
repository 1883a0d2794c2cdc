package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
)

// GC runs the server's garbage collection.
func (c *Client) GC(ctx context.Context) (*sbx.GCReport, error) {
	var rep sbx.GCReport
	return &rep, c.Call(ctx, http.MethodPost, "/v1/gc", nil, &rep)
}
