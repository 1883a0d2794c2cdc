package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Rename gives a sandbox of the server a new unique name ("" drops it).
func (c *Client) Rename(ctx context.Context, ref, name string) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/rename"), api.RenameRequest{Name: name}, &sb)
}

// Diff lists what a sandbox of the server changed in its root over its
// image.
func (c *Client) Diff(ctx context.Context, ref string) ([]sbx.Change, error) {
	var l api.ChangeList
	return l.Changes, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/diff"), nil, &l)
}

// TagImage gives an image of the server's cache a further name.
func (c *Client) TagImage(ctx context.Context, source, target string) (*sbx.Image, error) {
	var img sbx.Image
	return &img, imageErr(c.Call(ctx, http.MethodPost, "/v1/images/tag", api.TagRequest{Source: source, Target: target}, &img))
}

// ImageHistory says how an image of the server's cache was built, newest
// step first.
func (c *Client) ImageHistory(ctx context.Context, ref string) ([]sbx.ImageHistoryEntry, error) {
	var h api.ImageHistory
	return h.History, imageErr(c.Call(ctx, http.MethodGet, "/v1/images/history?ref="+url.QueryEscape(ref), nil, &h))
}

// SaveImage writes images of the server's cache to w as one OCI archive.
// The context alone bounds the download; a server that fails midway
// aborts it, which is an error here.
func (c *Client) SaveImage(ctx context.Context, refs []string, w io.Writer) error {
	data, err := json.Marshal(api.SaveRequest{Refs: refs})
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/images/save", bytes.NewReader(data), api.ContentTypeJSON)
	if err != nil {
		return imageErr(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, api.ContentTypeTar) {
		return fmt.Errorf("sbx server: save replied %q, not an archive", ct)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("sbx server: receive the archive: %w", err)
	}
	return nil
}

// DiskUsage says what the server's images, layers and sandboxes hold.
func (c *Client) DiskUsage(ctx context.Context) (*sbx.DiskUsage, error) {
	var du sbx.DiskUsage
	return &du, c.Call(ctx, http.MethodGet, "/v1/system/df", nil, &du)
}

// Prune removes the server's stopped sandboxes, (o.All) unused images and
// unused layers.
func (c *Client) Prune(ctx context.Context, o sbx.PruneOptions) (*sbx.PruneReport, error) {
	var rep sbx.PruneReport
	return &rep, c.Call(ctx, http.MethodPost, "/v1/system/prune", o, &rep)
}

// Top lists the processes of a running sandbox of the server.
func (c *Client) Top(ctx context.Context, ref string) ([]sbx.ProcessInfo, error) {
	var l api.ProcessList
	return l.Processes, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/top"), nil, &l)
}

// Export writes the root file system of a sandbox of the server to w as a
// tar. The context alone bounds the download; a server that fails midway
// aborts it, which is an error here.
func (c *Client) Export(ctx context.Context, ref string, w io.Writer) error {
	resp, err := c.Do(ctx, http.MethodGet, sandboxURL(ref, "/export"), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("sbx server: receive the export: %w", err)
	}
	return nil
}
