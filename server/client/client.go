// Package client is the Go client of sbx's REST server (sbx serve). It
// needs no cgo, only the wire types of the server (server/api) and of the
// executor (executor/api), so remote controllers can embed it.
//
//	c, _ := client.New("unix:///run/sbx/sbx.sock", client.Options{})
//	sb, _ := c.CreateSandbox(ctx, api.CreateRequest{Image: "busybox"})
//	var res struct{ ExitCode int `json:"exit_code"`; Stdout string `json:"stdout"` }
//	_ = c.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"argv": []string{"true"}}, &res)
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

// Close drops idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// Error is an error reply of the server (or of a sandbox's executor).
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("sbx server: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
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

// Health calls GET /healthz (no token needed).
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.Call(ctx, http.MethodGet, "/healthz", nil, &h)
}

// CreateSandbox creates a sandbox and returns it once its executor answers.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateRequest) (*api.Sandbox, error) {
	var sb api.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, "/v1/sandboxes", req, &sb)
}

// ListOptions filter ListSandboxes.
type ListOptions struct {
	// Labels must all match; an empty value matches any value.
	Labels map[string]string
	// Status, if set, must match.
	Status string
	// Running selects running, paused and creating sandboxes.
	Running bool
}

// ListSandboxes lists sandboxes, oldest first.
func (c *Client) ListSandboxes(ctx context.Context, o ListOptions) ([]api.Sandbox, error) {
	q := url.Values{}
	for k, v := range o.Labels {
		q.Add("label", k+"="+v)
	}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Running {
		q.Set("running", "true")
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.SandboxList
	return l.Sandboxes, c.Call(ctx, http.MethodGet, path, nil, &l)
}

func sandboxURL(ref, suffix string) string { return "/v1/sandboxes/" + url.PathEscape(ref) + suffix }

// GetSandbox returns the sandbox ref (id, unique id prefix or name).
func (c *Client) GetSandbox(ctx context.Context, ref string) (*api.Sandbox, error) {
	var sb api.Sandbox
	return &sb, c.Call(ctx, http.MethodGet, sandboxURL(ref, ""), nil, &sb)
}

// RemoveSandbox removes a sandbox; without force a running one is refused
// (409).
func (c *Client) RemoveSandbox(ctx context.Context, ref string, force bool) error {
	return c.Call(ctx, http.MethodDelete, sandboxURL(ref, "?force="+strconv.FormatBool(force)), nil, nil)
}

func (c *Client) change(ctx context.Context, ref, op string, in any) (*api.Sandbox, error) {
	var sb api.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/"+op), in, &sb)
}

// PauseSandbox freezes every process of a sandbox.
func (c *Client) PauseSandbox(ctx context.Context, ref string) (*api.Sandbox, error) {
	return c.change(ctx, ref, "pause", nil)
}

// ResumeSandbox thaws a paused sandbox.
func (c *Client) ResumeSandbox(ctx context.Context, ref string) (*api.Sandbox, error) {
	return c.change(ctx, ref, "resume", nil)
}

// StartSandbox starts a stopped sandbox again.
func (c *Client) StartSandbox(ctx context.Context, ref string) (*api.Sandbox, error) {
	return c.change(ctx, ref, "start", nil)
}

// StopSandbox sends SIGTERM to the sandbox's PID 1 and SIGKILL after
// timeout (0: the server's default).
func (c *Client) StopSandbox(ctx context.Context, ref string, timeout time.Duration) (*api.Sandbox, error) {
	return c.change(ctx, ref, "stop", api.StopRequest{Timeout: api.Duration(timeout)})
}

// SandboxStats returns what a sandbox uses now.
func (c *Client) SandboxStats(ctx context.Context, ref string) (api.Stats, error) {
	var st api.Stats
	return st, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/stats"), nil, &st)
}

// CommitSandbox stores the sandbox's writable layer as a new image called
// name in the server's image cache (POST /v1/sandboxes/{id}/commit).
func (c *Client) CommitSandbox(ctx context.Context, ref, name string) (api.Image, error) {
	var img api.Image
	return img, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/commit"), api.CommitRequest{Name: name}, &img)
}

// HostInfo returns the facts of the server's host (GET /v1/info).
func (c *Client) HostInfo(ctx context.Context) (api.HostInfo, error) {
	var info api.HostInfo
	return info, c.Call(ctx, http.MethodGet, "/v1/info", nil, &info)
}

// GC runs the server's garbage collection (POST /v1/gc).
func (c *Client) GC(ctx context.Context) (api.GCReport, error) {
	var rep api.GCReport
	return rep, c.Call(ctx, http.MethodPost, "/v1/gc", nil, &rep)
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

// PullImage pulls ref into the server's image cache. With a progress
// function it asks for NDJSON progress and calls it for every frame.
func (c *Client) PullImage(ctx context.Context, ref string, progress func(api.PullProgress)) (api.Image, error) {
	var img api.Image
	if progress == nil {
		return img, c.Call(ctx, http.MethodPost, "/v1/images/pull", api.PullRequest{Ref: ref}, &img)
	}
	var got bool
	err := c.Stream(ctx, http.MethodPost, "/v1/images/pull?progress=1", api.PullRequest{Ref: ref}, 1<<20, func(line []byte) error {
		var f api.PullFrame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("sbx server: bad pull frame: %w", err)
		}
		switch f.Type {
		case api.FrameProgress:
			if f.Progress != nil {
				progress(*f.Progress)
			}
		case api.FrameResult:
			if f.Image != nil {
				img, got = *f.Image, true
			}
		case api.FrameError:
			if f.Error != nil {
				return &Error{Status: http.StatusOK, Code: f.Error.Code, Message: f.Error.Message}
			}
		}
		return nil
	})
	if err == nil && !got {
		err = errors.New("sbx server: pull stream ended without a result")
	}
	return img, err
}

// ListImages lists the server's cached images.
func (c *Client) ListImages(ctx context.Context) ([]api.Image, error) {
	var l api.ImageList
	return l.Images, c.Call(ctx, http.MethodGet, "/v1/images", nil, &l)
}

// RemoveImage removes an image from the server's cache.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	return c.Call(ctx, http.MethodDelete, "/v1/images/"+ref, nil, nil)
}

// InspectImage shows one image of the server's cache in full.
func (c *Client) InspectImage(ctx context.Context, ref string) (api.ImageDetail, error) {
	var img api.ImageDetail
	return img, c.Call(ctx, http.MethodGet, "/v1/images/"+url.PathEscape(ref), nil, &img)
}

// GCImages removes the layers of the server's cache that no image and no
// sandbox uses.
func (c *Client) GCImages(ctx context.Context) (api.ImageGCReport, error) {
	var rep api.ImageGCReport
	return rep, c.Call(ctx, http.MethodPost, "/v1/images/gc", nil, &rep)
}

// ImportImage uploads an image archive (an OCI archive, a docker save tar
// or a root filesystem tarball) into the server's cache under name (may
// be empty when the archive names its image). The context alone bounds
// the upload.
func (c *Client) ImportImage(ctx context.Context, archive io.Reader, name string) (api.Image, error) {
	var img api.Image
	path := "/v1/images/import"
	if name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	resp, err := c.Do(ctx, http.MethodPost, path, archive, "application/x-tar")
	if err != nil {
		return img, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.opts.MaxReplyBytes)).Decode(&img); err != nil {
		return img, fmt.Errorf("sbx server: bad reply to an import: %w", err)
	}
	return img, nil
}

// PrepareImage builds (once) an image on the server from a base image
// and a setup script, like sbx prepare. The context alone bounds the
// call: a build may take long.
func (c *Client) PrepareImage(ctx context.Context, req api.PrepareRequest) (api.PrepareReply, error) {
	var rep api.PrepareReply
	data, err := json.Marshal(req)
	if err != nil {
		return rep, err
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/images/prepare", bytes.NewReader(data), api.ContentTypeJSON)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, c.opts.MaxReplyBytes)).Decode(&rep); err != nil {
		return rep, fmt.Errorf("sbx server: bad reply to a prepare: %w", err)
	}
	return rep, nil
}

// Events streams the server's events after sequence number since (0: only
// new ones) to fn, in order, until ctx ends, fn fails or the server closes
// the stream. Resume with the Seq of the last event received.
func (c *Client) Events(ctx context.Context, since uint64, fn func(api.Event) error) error {
	path := "/v1/events"
	if since > 0 {
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
				var e api.Event
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

// DialExecutor opens a tunnel to the executor of sandbox ref (GET
// /v1/sandboxes/{id}/connect with Upgrade: sbx-executor) and returns a
// connection that speaks the executor's own HTTP API, e.g. for
// executor/client.NewWithDialer. ctx bounds only the dial and the
// upgrade.
func (c *Client) DialExecutor(ctx context.Context, ref string) (net.Conn, error) {
	conn, err := c.dialRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("sbx server %s: %w", c.host, err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+sandboxURL(ref, "/connect"), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "sbx-executor")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sbx server: open tunnel: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sbx server: open tunnel: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the upgrade reply's reader already buffered
// before reading the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Executor returns a client of the executor of sandbox ref that reaches it
// through tunnels (DialExecutor): exec, streamed exec, shell sessions,
// files and archives with the executor's own types, exactly as on the host.
func (c *Client) Executor(ref string, opts execclient.Options) *execclient.Client {
	return execclient.NewWithDialer(func(ctx context.Context) (net.Conn, error) {
		return c.DialExecutor(ctx, ref)
	}, opts)
}
