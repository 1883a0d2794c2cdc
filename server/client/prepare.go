package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Prepare builds (once) an image on the server from a base image and a
// setup script, with the same cache key as a local Prepare, its build
// sandbox created under the server's policy; the script's output (its
// last 64 KiB) is written to o.Output. The context alone bounds the call:
// a build may take long.
func (c *Client) Prepare(ctx context.Context, o sbx.PrepareOptions) (*sbx.PrepareResult, error) {
	req := api.PrepareRequest{Base: o.Base, Script: o.Script, Sandbox: &o.Sandbox}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/images/prepare", bytes.NewReader(data), api.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var rep api.PrepareReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.opts.MaxReplyBytes)).Decode(&rep); err != nil {
		return nil, fmt.Errorf("sbx server: bad reply to a prepare: %w", err)
	}
	if o.Output != nil && rep.Output != "" {
		if _, err := io.WriteString(o.Output, rep.Output); err != nil {
			return nil, err
		}
	}
	return &sbx.PrepareResult{Image: rep.Image, Cached: rep.Cached}, nil
}
