package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// CreateSession starts a shell session.
func (c *Client) CreateSession(ctx context.Context, req api.SessionRequest) (api.Session, error) {
	var s api.Session
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathSessions, req, &s, 64<<10)
	return s, err
}

// ListSessions lists the open sessions.
func (c *Client) ListSessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathSessions, nil, &l, 4<<20)
	return l.Sessions, err
}

// DeleteSession kills a session's shell and everything it started.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.call(ctx, c.opts.Timeout, http.MethodDelete, api.PathSessions+"/"+url.PathEscape(id), nil, nil, 64<<10)
}

// Run runs a command in a session, continues it (Command "") or sends it
// input (IsInput). The call lasts at most the request's timeout_s (default
// 120 s) plus the grace.
func (c *Client) Run(ctx context.Context, id string, req api.RunRequest) (api.RunResult, error) {
	d := 120 * time.Second
	if req.TimeoutS > 0 {
		d = seconds(req.TimeoutS)
	}
	out := int64(req.MaxOutputBytes)
	if out <= 0 {
		out = 64 << 10
	}
	out = min(out, 8<<20)
	var res api.RunResult
	err := c.call(ctx, d+c.opts.Grace, http.MethodPost, api.PathSessions+"/"+url.PathEscape(id)+"/run", req, &res, 6*out+64<<10)
	return res, err
}
