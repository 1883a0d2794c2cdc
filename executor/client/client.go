// Package client talks to an sbx executor over its unix socket. It is used
// by the sandbox Host, the CLI and the REST server's proxy.
//
// The executor runs inside the sandbox and is untrusted: every call has a
// deadline (the context's, or a default when it has none) and every reply
// is read under a size cap, so a hostile or stuck executor can neither hang
// nor exhaust the host.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/internal/termsafe"
)

// Options tune a Client. Zero values take the defaults in brackets.
type Options struct {
	// Timeout is the deadline of calls whose context has none and whose
	// duration the request does not say [30 s].
	Timeout time.Duration
	// TransferTimeout is the deadline of file and archive transfers and of
	// commands without timeout_s, when the context has none [10 min].
	TransferTimeout time.Duration
	// Grace is added to a request's own timeout (timeout_s) to get the
	// call's deadline [10 s].
	Grace time.Duration
	// MaxReplyBytes caps a JSON reply [64 MiB]; exec replies are capped by
	// what max_output_bytes allows.
	MaxReplyBytes int64
	// MaxFrameBytes caps one line of a streamed exec [1 MiB].
	MaxFrameBytes int
	// IdleTimeout ends a file or archive transfer during which the
	// executor neither sends nor takes a byte for this long [30 s]: a
	// stalled or hostile executor cannot hold sbx cp for the whole
	// TransferTimeout.
	IdleTimeout time.Duration
}

// Client calls one executor. It is safe for concurrent use and keeps
// connections open between calls.
type Client struct {
	dial func(ctx context.Context) (net.Conn, error)
	hc   *http.Client
	tr   *http.Transport
	pool connPool // kept-alive connections of JSON calls
	opts Options
}

// New returns a client for the executor listening on socketPath.
func New(socketPath string, opts Options) *Client {
	var d net.Dialer
	return NewWithDialer(func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "unix", socketPath)
	}, opts)
}

// NewWithDialer returns a client that reaches the executor through dial
// (for sockets whose path is too long for a sockaddr, or that live in
// another mount namespace).
func NewWithDialer(dial func(ctx context.Context) (net.Conn, error), opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.TransferTimeout <= 0 {
		opts.TransferTimeout = 10 * time.Minute
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = 64 << 20
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = 1 << 20
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 30 * time.Second
	}
	tr := &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Client{dial: dial, hc: &http.Client{Transport: tr}, tr: tr, opts: opts}
}

// Close drops idle connections.
func (c *Client) Close() {
	c.tr.CloseIdleConnections()
	c.pool.close()
}

// Error is an error reply of the executor.
type Error struct {
	Status  int
	Code    string
	Message string
	Lines   []int
}

func (e *Error) Error() string {
	if e.Status/100 == 2 { // an error frame inside a streamed reply
		return fmt.Sprintf("executor: %s (%s)", e.Message, e.Code)
	}
	return fmt.Sprintf("executor: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// Unwrap maps a refusal of the request to the contract: a 400 reply, or
// an error frame coded bad_request (a user or working directory the
// sandbox lacks, a bad signal), is sbx.ErrInvalid, so that callers test
// it with errors.Is as they test the host's own refusals. Other replies
// wrap nothing: what the executor says cannot make an error look like
// one of the host's states.
func (e *Error) Unwrap() error {
	if e.Status == http.StatusBadRequest || e.Status/100 == 2 && e.Code == api.CodeBadRequest {
		return sbx.ErrInvalid
	}
	return nil
}

// IsCode reports whether err is an executor error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ErrReplyTooLarge reports a reply over its size cap.
var ErrReplyTooLarge = errors.New("executor reply exceeds its size cap")

// withDeadline adds d to ctx unless it already has a deadline.
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// week is the executor's cap of a request's timeout.
const week = 7 * 24 * time.Hour

// seconds converts a request's timeout, capped at a week (the executor's
// own cap) so huge values cannot overflow.
func seconds(s float64) time.Duration {
	if s*float64(time.Second) >= float64(week) {
		return week
	}
	return time.Duration(s * float64(time.Second))
}

// Do sends one request and returns the reply with its body capped at
// maxBytes (reading past it fails with ErrReplyTooLarge). Non-2xx replies
// come back as *Error. The caller closes the body. The REST proxy uses it.
func (c *Client) Do(ctx context.Context, method, pathQuery string, body io.Reader, contentType string, maxBytes int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://executor"+pathQuery, body)
	if err != nil {
		return nil, fmt.Errorf("executor request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("executor %s %s: %w", method, pathQuery, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxBytes}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" {
		return &Error{Status: resp.StatusCode, Code: api.CodeInternal, Message: fmt.Sprintf("unexpected reply: %.200q", data)}
	}
	return newError(resp.StatusCode, e.Error.Code, e.Error.Message, e.Error.Lines)
}

// newError is an executor error whose strings, which the sandbox chose,
// are made safe to print: no escape sequences, bounded length.
func newError(status int, code, message string, lines []int) *Error {
	if len(lines) > 64 {
		lines = lines[:64]
	}
	return &Error{Status: status, Code: termsafe.String(code, 64), Message: termsafe.String(message, 4096), Lines: lines}
}

// cappedBody fails reads past its cap instead of truncating silently.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Allow a clean EOF exactly at the cap.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, ErrReplyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// call sends a JSON request (nil for none) and decodes a JSON reply into out.
// It runs on a kept-alive connection of its own (see roundTrip).
func (c *Client) call(ctx context.Context, timeout time.Duration, method, pathQuery string, in, out any, maxBytes int64) error {
	ctx, cancel := withDeadline(ctx, timeout)
	defer cancel()
	var data []byte
	ct := ""
	if in != nil {
		var err error
		if data, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		ct = "application/json"
	}
	resp, err := c.roundTrip(ctx, method, pathQuery, data, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	body := &cappedBody{rc: resp.Body, left: maxBytes}
	if out != nil {
		if err := json.NewDecoder(body).Decode(out); err != nil {
			return fmt.Errorf("executor %s %s: decode reply: %w", method, pathQuery, withCtxErr(ctx, err))
		}
	}
	// The rest (a newline) is read so that the connection is kept.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("executor %s %s: %w", method, pathQuery, withCtxErr(ctx, err))
	}
	return nil
}

// Health checks that the executor answers.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathHealth, nil, &h, 64<<10)
	return h, err
}

// Info reports resource use inside the sandbox.
func (c *Client) Info(ctx context.Context) (api.Info, error) {
	var i api.Info
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathInfo, nil, &i, 64<<10)
	return i, err
}

// maxPid bounds a pid the executor reports: the kernel's PID_MAX_LIMIT.
const maxPid = 1 << 22

// errIdle is the cause of a transfer ended by Options.IdleTimeout.
var errIdle = errors.New("the executor stalled: no data moved")

// maxStatusReply caps a main command status (argv and recent exits).
const maxStatusReply = 1 << 20
