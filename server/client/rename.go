package client

import (
	"context"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Renew renews the owner lease of a sandbox of the server (POST
// /v1/sandboxes/{id}/renew).
func (c *Client) Renew(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/renew"), nil, &sb)
}

// SetEgress replaces the egress policy of a running bridged sandbox of the
// server (POST /v1/sandboxes/{id}/egress).
func (c *Client) SetEgress(ctx context.Context, ref string, u sbx.EgressUpdate) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/egress"), u, &sb)
}

// Rename gives a sandbox of the server a new unique name ("" drops it).
func (c *Client) Rename(ctx context.Context, ref, name string) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/rename"), api.RenameRequest{Name: name}, &sb)
}
