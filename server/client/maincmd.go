package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// maxLogFrame caps one NDJSON log frame from the server (the executor
// sends chunks of at most 64 KiB, JSON-escaped).
const maxLogFrame = 1 << 20

// Logs streams the output of the sandbox's main command (GET
// /v1/sandboxes/{id}/logs) to fn, ending with the sbx.LogEnd frame. A
// stream cut before that frame is io.ErrUnexpectedEOF: resume from the
// offset after the last frame received.
func (c *Client) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	q := url.Values{}
	if o.Since > 0 {
		q.Set("since", strconv.FormatInt(o.Since, 10))
	}
	if o.Tail > 0 {
		q.Set("tail", strconv.FormatInt(o.Tail, 10))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	path := sandboxURL(ref, "/logs")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	if !o.Follow {
		var cancel context.CancelFunc
		ctx, cancel = c.withTimeout(ctx)
		defer cancel()
	}
	resp, err := c.Do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLogFrame)
	for sc.Scan() {
		var f sbx.LogFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return fmt.Errorf("sbx server: bad log frame: %w", err)
		}
		if err := fn(f); err != nil {
			return err
		}
		if f.Type == sbx.LogEnd {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sbx server: read logs: %w", err)
	}
	return fmt.Errorf("sbx server: the logs stream ended before its end frame: %w", io.ErrUnexpectedEOF)
}

// Wait waits until the sandbox's main command has ended for good (POST
// /v1/sandboxes/{id}/wait). Only ctx bounds it.
func (c *Client) Wait(ctx context.Context, ref string) (*sbx.Exit, error) {
	resp, err := c.Do(ctx, http.MethodPost, sandboxURL(ref, "/wait"), nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var exit sbx.Exit
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("sbx server: read wait reply: %w", err)
	}
	if err := json.Unmarshal(data, &exit); err != nil {
		return nil, fmt.Errorf("sbx server: bad wait reply: %w", err)
	}
	return &exit, nil
}

// Signal sends a signal ("SIGTERM") to the sandbox's main command (POST
// /v1/sandboxes/{id}/signal).
func (c *Client) Signal(ctx context.Context, ref, signal string) error {
	if signal == "" {
		return fmt.Errorf("%w: signal is required, e.g. SIGTERM", sbx.ErrInvalid)
	}
	return c.Call(ctx, http.MethodPost, sandboxURL(ref, "/signal"), api.SignalRequest{Signal: signal}, nil)
}
