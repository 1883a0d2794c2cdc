package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// ReadFile copies the file at path into w, failing with ErrReplyTooLarge
// past max bytes.
func (c *Client) ReadFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	return c.download(ctx, api.PathFiles+"?path="+url.QueryEscape(path), w, max)
}

// ReadLines returns lines start..end (1-based, inclusive; end -1 for the
// last) of a text file.
func (c *Client) ReadLines(ctx context.Context, path string, start, end int, max int64) ([]byte, error) {
	var b bytes.Buffer
	q := url.Values{"path": {path}, "start_line": {strconv.Itoa(start)}, "end_line": {strconv.Itoa(end)}}
	_, err := c.download(ctx, api.PathFiles+"?"+q.Encode(), &b, max)
	return b.Bytes(), err
}

// GetArchive writes a tar of the file or directory at path into w, failing
// with ErrReplyTooLarge past max bytes.
func (c *Client) GetArchive(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	return c.download(ctx, api.PathFsArchive+"?path="+url.QueryEscape(path), w, max)
}

func (c *Client) download(ctx context.Context, pathQuery string, w io.Writer, max int64) (int64, error) {
	ctx, cancel := withDeadline(ctx, c.opts.TransferTimeout)
	defer cancel()
	ctx, touch, stop := c.watchIdle(ctx)
	defer stop()
	resp, err := c.Do(ctx, http.MethodGet, pathQuery, nil, "", max)
	if err != nil {
		return 0, idleCause(ctx, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, touchReader{resp.Body, touch})
	if err != nil {
		return n, fmt.Errorf("executor GET %s: %w", pathQuery, idleCause(ctx, err))
	}
	return n, nil
}

// watchIdle returns ctx cancelled once touch has not been called for
// IdleTimeout, and a function that stops watching.
func (c *Client) watchIdle(ctx context.Context) (context.Context, func(), func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	d := c.opts.IdleTimeout
	t := time.AfterFunc(d, func() { cancel(fmt.Errorf("%w for %v", errIdle, d)) })
	return ctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}

// idleCause replaces err with the idle timeout when that ended ctx.
func idleCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
		return cause
	}
	return err
}

// touchReader calls touch whenever bytes move through it.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// WriteFile replaces the file at path with the content of r, atomically.
// mode 0 keeps an existing file's mode (0644 for a new file).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) (api.WriteResult, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	var res api.WriteResult
	err := c.upload(ctx, api.PathFiles+"?"+q.Encode(), r, "application/octet-stream", &res)
	return res, err
}

// PutArchive extracts the tar stream r into the directory dir.
func (c *Client) PutArchive(ctx context.Context, dir string, r io.Reader) (api.ArchiveResult, error) {
	var res api.ArchiveResult
	err := c.upload(ctx, api.PathFsArchive+"?path="+url.QueryEscape(dir), r, "application/x-tar", &res)
	return res, err
}

func (c *Client) upload(ctx context.Context, pathQuery string, r io.Reader, ct string, out any) error {
	ctx, cancel := withDeadline(ctx, c.opts.TransferTimeout)
	defer cancel()
	ctx, touch, stop := c.watchIdle(ctx)
	defer stop()
	resp, err := c.Do(ctx, http.MethodPut, pathQuery, touchReader{r, touch}, ct, 64<<10)
	if err != nil {
		return idleCause(ctx, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("executor PUT %s: decode reply: %w", pathQuery, err)
	}
	return nil
}

// Edit runs one editor command (view, create, str_replace, insert,
// undo_edit).
func (c *Client) Edit(ctx context.Context, req api.EditRequest) (api.EditResult, error) {
	var res api.EditResult
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathFilesEdit, req, &res, 16<<20)
	return res, err
}

// List lists a directory.
func (c *Client) List(ctx context.Context, path string) (api.Listing, error) {
	var l api.Listing
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathFsList+"?path="+url.QueryEscape(path), nil, &l, c.opts.MaxReplyBytes)
	return l, err
}
