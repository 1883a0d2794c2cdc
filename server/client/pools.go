package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

var _ sbx.Pools = (*Client)(nil)

func poolURL(name, suffix string) string { return "/v1/pools/" + url.PathEscape(name) + suffix }

// CreatePool defines a warm pool on the server (POST /v1/pools).
func (c *Client) CreatePool(ctx context.Context, spec sbx.PoolSpec) (*sbx.Pool, error) {
	var p sbx.Pool
	return &p, c.Call(ctx, http.MethodPost, "/v1/pools", spec, &p)
}

// ListPools lists the server's pools with their members.
func (c *Client) ListPools(ctx context.Context) ([]*sbx.Pool, error) {
	var l api.PoolList
	return l.Pools, c.Call(ctx, http.MethodGet, "/v1/pools", nil, &l)
}

// GetPool returns one pool.
func (c *Client) GetPool(ctx context.Context, name string) (*sbx.Pool, error) {
	var p sbx.Pool
	return &p, c.Call(ctx, http.MethodGet, poolURL(name, ""), nil, &p)
}

func (c *Client) poolOp(ctx context.Context, method, name, suffix string) (*sbx.PoolReport, error) {
	var r sbx.PoolReport
	return &r, c.Call(ctx, method, poolURL(name, suffix), nil, &r)
}

// FillPool starts members until the pool is full.
func (c *Client) FillPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return c.poolOp(ctx, http.MethodPost, name, "/fill")
}

// DrainPool removes the pool's idle members.
func (c *Client) DrainPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return c.poolOp(ctx, http.MethodPost, name, "/drain")
}

// RemovePool removes the pool and its idle members.
func (c *Client) RemovePool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return c.poolOp(ctx, http.MethodDelete, name, "")
}
