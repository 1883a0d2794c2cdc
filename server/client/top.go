package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Top lists the processes of a running sandbox of the server.
func (c *Client) Top(ctx context.Context, ref string) ([]sbx.ProcessInfo, error) {
	var l api.ProcessList
	return l.Processes, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/top"), nil, &l)
}
