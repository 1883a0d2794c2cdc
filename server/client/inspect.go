package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// List lists the server's sandboxes that f selects, oldest first.
func (c *Client) List(ctx context.Context, f sbx.Filter) ([]*sbx.Sandbox, error) {
	q := url.Values{}
	for k, v := range f.Labels {
		q.Add("label", k+"="+v)
	}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	if f.Running {
		q.Set("running", "true")
	}
	if f.Pooled {
		q.Set("pooled", "true")
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.SandboxList
	return l.Sandboxes, c.Call(ctx, http.MethodGet, path, nil, &l)
}

// Get returns the sandbox ref (id, unique id prefix or name).
func (c *Client) Get(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.Inspect(ctx, ref)
}

// Inspect returns the sandbox ref with its processes.
func (c *Client) Inspect(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodGet, sandboxURL(ref, ""), nil, &sb)
}
