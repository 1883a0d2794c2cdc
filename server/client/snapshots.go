package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

var _ sbx.Snapshots = (*Client)(nil)

func snapshotURL(name, suffix string) string {
	return "/v1/snapshots/" + url.PathEscape(name) + suffix
}

// Checkpoint writes a sandbox of the server to a new snapshot there.
func (c *Client) Checkpoint(ctx context.Context, ref string, o sbx.CheckpointOptions) (*sbx.Snapshot, error) {
	var s sbx.Snapshot
	return &s, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/checkpoint"), o, &s)
}

// Restore starts a new sandbox on the server from one of its snapshots.
func (c *Client) Restore(ctx context.Context, snapshot string, o sbx.RestoreOptions) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, snapshotURL(snapshot, "/restore"), o, &sb)
}

// Fork starts copies of a running sandbox of the server.
func (c *Client) Fork(ctx context.Context, ref string, o sbx.ForkOptions) ([]*sbx.Sandbox, error) {
	var r api.ForkReply
	return r.Sandboxes, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/fork"), o, &r)
}

// ListSnapshots lists the server's snapshots.
func (c *Client) ListSnapshots(ctx context.Context) ([]*sbx.Snapshot, error) {
	var l api.SnapshotList
	return l.Snapshots, c.Call(ctx, http.MethodGet, "/v1/snapshots", nil, &l)
}

// InspectSnapshot returns one snapshot, its files checked by the server.
func (c *Client) InspectSnapshot(ctx context.Context, name string) (*sbx.Snapshot, error) {
	var s sbx.Snapshot
	return &s, c.Call(ctx, http.MethodGet, snapshotURL(name, ""), nil, &s)
}

// RemoveSnapshot deletes a snapshot of the server.
func (c *Client) RemoveSnapshot(ctx context.Context, name string) error {
	return c.Call(ctx, http.MethodDelete, snapshotURL(name, ""), nil, nil)
}

// ExportSnapshot writes a snapshot of the server to w as one tar.
func (c *Client) ExportSnapshot(ctx context.Context, name string, w io.Writer) error {
	resp, err := c.Do(ctx, http.MethodGet, snapshotURL(name, "/export"), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("sbx server: receive the snapshot: %w", err)
	}
	return nil
}

// ImportSnapshot sends a tar written by ExportSnapshot to the server.
func (c *Client) ImportSnapshot(ctx context.Context, r io.Reader, name string) (*sbx.Snapshot, error) {
	path := "/v1/snapshots/import"
	if name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	resp, err := c.Do(ctx, http.MethodPost, path, r, api.ContentTypeTar)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s sbx.Snapshot
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.opts.MaxReplyBytes)).Decode(&s); err != nil {
		return nil, fmt.Errorf("sbx server: bad reply to a snapshot import: %w", err)
	}
	return &s, nil
}
