package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sbxrun/sbx"
)

// Events streams the server's events after sequence number since (0: only
// new ones; sbx.EventsBuffered: all the server still holds) to fn, in order, until ctx ends, fn fails or the server closes
// the stream (io.ErrUnexpectedEOF). Resume with the Seq of the last event
// received.
func (c *Client) Events(ctx context.Context, since uint64, fn func(sbx.Event) error) error {
	path := "/v1/events"
	switch since {
	case 0:
	case sbx.EventsBuffered:
		path += "?since=0"
	default:
		path += "?since=" + strconv.FormatUint(since, 10)
	}
	resp, err := c.Do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				var e sbx.Event
				if err := json.Unmarshal(data, &e); err != nil {
					return fmt.Errorf("sbx server: bad event: %w", err)
				}
				if err := fn(e); err != nil {
					return err
				}
				data = data[:0]
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sbx server: read events: %w", err)
	}
	return io.ErrUnexpectedEOF
}
