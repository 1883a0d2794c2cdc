package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Commit stores the sandbox's writable layer as a new image called name in
// the server's image cache.
func (c *Client) Commit(ctx context.Context, ref, name string) (*sbx.Image, error) {
	var img sbx.Image
	return &img, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/commit"), api.CommitRequest{Name: name}, &img)
}
