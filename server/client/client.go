// Package client is the Go client of sbx's REST server (sbx serve). A
// *Client implements sbx.Sandboxes and sbx.Images, so code written against
// the contract runs unchanged against a server; it needs no cgo and no
// root, only the wire types.
//
//	c, _ := client.New("unix:///run/sbx/sbx.sock", client.Options{Token: token})
//	sb, _ := c.Create(ctx, sbx.Options{Image: "busybox"})
//	res, _ := c.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"true"}}, nil)
//	_ = c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/server/api"
)

// Options tune a Client. Zero values take the defaults in brackets.
type Options struct {
	// Token is sent as Authorization: Bearer <token>.
	Token string
	// TLS configures https:// hosts [system roots].
	TLS *tls.Config
	// Timeout bounds calls whose context has no deadline, except streams
	// (events, streamed exec, pulls with progress) [5 min].
	Timeout time.Duration
	// MaxReplyBytes caps a JSON reply [64 MiB].
	MaxReplyBytes int64
}

// Client calls one sbx server. It is safe for concurrent use.
type Client struct {
	host string // as given to New, for messages
	base string // scheme://host, no trailing slash
	// dialRaw opens a plain connection to the server (for tunnels).
	dialRaw func(ctx context.Context) (net.Conn, error)
	hc      *http.Client
	tr      *http.Transport
	opts    Options
	// leases ends when the client closes: the renewals of the leases of
	// the sandboxes it created (Options.Lease) stop then.
	leases    context.Context
	endLeases context.CancelFunc
}

// New returns a client for host: "unix:///path/to/sbx.sock",
// "http://host:port", "https://host:port", "tcp://host:port" or
// "host:port" (plain HTTP).
func New(host string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = 64 << 20
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSClientConfig:       opts.TLS,
		ForceAttemptHTTP2:     opts.TLS != nil,
		ExpectContinueTimeout: time.Second,
	}
	c := &Client{host: host, tr: tr, opts: opts}
	c.leases, c.endLeases = context.WithCancel(context.Background())
	switch {
	case strings.HasPrefix(host, "unix://"):
		sock := strings.TrimPrefix(host, "unix://")
		if sock == "" {
			return nil, fmt.Errorf("sbx host %q: give the socket path, e.g. unix:///run/sbx/sbx.sock", host)
		}
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
		c.base = "http://sbx"
		c.dialRaw = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }
	case strings.HasPrefix(host, "http://"), strings.HasPrefix(host, "https://"):
		u, err := url.Parse(host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("sbx host %q: not a URL", host)
		}
		c.base = u.Scheme + "://" + u.Host
	case strings.HasPrefix(host, "tcp://"):
		c.base = "http://" + strings.TrimPrefix(host, "tcp://")
	case host != "" && !strings.Contains(host, "/"):
		c.base = "http://" + host
	default:
		return nil, fmt.Errorf("sbx host %q: use unix:///path, http://host:port, https://host:port or host:port", host)
	}
	if c.dialRaw == nil {
		u, _ := url.Parse(c.base)
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
		}
		c.dialRaw = func(ctx context.Context) (net.Conn, error) {
			if u.Scheme != "https" {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			}
			cfg := &tls.Config{}
			if opts.TLS != nil {
				cfg = opts.TLS.Clone()
			}
			if cfg.ServerName == "" {
				cfg.ServerName = u.Hostname()
			}
			cfg.NextProtos = []string{"http/1.1"} // a tunnel needs HTTP/1.1
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// Close stops renewing the leases of the sandboxes the client created
// (they are removed once their lease runs out) and drops idle
// connections.
func (c *Client) Close() {
	c.endLeases()
	c.tr.CloseIdleConnections()
}

// Error is an error reply of the server (or of a sandbox's executor). It
// unwraps to the contract's error its status and code stand for
// (sbx.ErrNotFound for 404...), so errors.Is works as with a local host.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("sbx server: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// Unwrap returns the contract's error of the reply, or nil.
func (e *Error) Unwrap() error {
	switch {
	case e.Status == http.StatusNotFound:
		return sbx.ErrNotFound
	case e.Code == api.CodePortInUse:
		return sbx.ErrPortInUse
	case e.Status == http.StatusConflict:
		return sbx.ErrState
	case e.Status == http.StatusTooManyRequests:
		return sbx.ErrLimit
	case e.Code == api.CodeForbidden:
		return sbx.ErrForbidden
	case e.Status == http.StatusBadRequest, e.Status == http.StatusUnprocessableEntity:
		return sbx.ErrInvalid
	case e.Status == http.StatusNotImplemented:
		return sbx.ErrUnsupported
	case e.Code == api.CodeRegistryAuth:
		return sbx.ErrRegistryAuth
	case e.Code == api.CodeRegistryUnreachable:
		return sbx.ErrRegistryUnreachable
	}
	return nil
}

// IsCode reports whether err is an error reply with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// StatusOf returns the HTTP status of an error reply, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// SandboxPath is the server path of an executor route of sandbox id:
// SandboxPath(id, "/exec") is /v1/sandboxes/{id}/exec.
func SandboxPath(id, executorPath string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + executorPath
}

// Do sends one request to path (with its query) and returns the reply;
// non-2xx replies come back as *Error. The caller closes the body. The
// context alone bounds the call.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sbx server %s: %w", c.host, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e api.Error
	if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
		return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(data))}
}

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// Call sends in as JSON (nil for no body) and decodes the reply into out
// (nil to discard it).
func (c *Client) Call(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var body io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(data), api.ContentTypeJSON
	}
	resp, err := c.Do(ctx, method, path, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("sbx server: read reply: %w", err)
	}
	if int64(len(data)) > c.opts.MaxReplyBytes {
		return fmt.Errorf("sbx server: reply exceeds %d bytes", c.opts.MaxReplyBytes)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("sbx server: bad reply to %s %s: %w", method, path, err)
	}
	return nil
}

var (
	_ sbx.Backend   = (*Client)(nil)
	_ sbx.Sandboxes = (*Client)(nil)
	_ sbx.Images    = (*Client)(nil)
)

// Health calls GET /healthz (no token needed).
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.Call(ctx, http.MethodGet, "/healthz", nil, &h)
}

// Stream sends in as JSON to path and calls fn with each line of the
// NDJSON reply (at most maxLine bytes each) until the reply ends. Streamed
// exec (SandboxPath(id, "/exec?stream=1")) uses it.
func (c *Client) Stream(ctx context.Context, method, path string, in any, maxLine int, fn func(line []byte) error) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := c.Do(ctx, method, path, bytes.NewReader(data), api.ContentTypeJSON)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sbx server: read stream: %w", err)
	}
	return nil
}

// Executor returns a client of the executor of sandbox ref that reaches it
// through tunnels (DialExecutor): exec, streamed exec, shell sessions,
// files and archives with the executor's own types, exactly as on the host.
func (c *Client) Executor(ref string, opts execclient.Options) *execclient.Client {
	return execclient.NewWithDialer(func(ctx context.Context) (net.Conn, error) {
		return c.DialExecutor(ctx, ref)
	}, opts)
}

func sandboxURL(ref, suffix string) string { return "/v1/sandboxes/" + url.PathEscape(ref) + suffix }
