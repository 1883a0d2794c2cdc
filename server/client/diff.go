package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Diff lists what a sandbox of the server changed in its root over its
// image.
func (c *Client) Diff(ctx context.Context, ref string) ([]sbx.Change, error) {
	var l api.ChangeList
	return l.Changes, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/diff"), nil, &l)
}
