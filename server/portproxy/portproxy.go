// Package portproxy forwards HTTP traffic to TCP ports inside sandboxes:
// plain requests with their headers and query strings, bodies streamed in
// both directions as they come, and protocol upgrades (WebSocket) spliced
// for as long as both ends keep them open. It adds no authentication of
// its own: what it fronts (an OpenHands Agent Server, an app in the
// sandbox) checks its callers, and the front-end that mounts it decides
// which sandbox and port a path reaches.
//
// Whatever answers inside the sandbox is untrusted: response headers are
// capped, dials are bounded, and nothing it sends changes host state.
package portproxy

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DialFunc connects to TCP port on the loopback of sandbox id (inside its
// network namespace).
type DialFunc func(ctx context.Context, id string, port int) (net.Conn, error)

// Target is where one request goes: a port of a sandbox, and the path to
// ask for there.
type Target struct {
	Sandbox string
	Port    int
	// Path is the request path as the sandbox should see it, escaped as
	// on the wire ("/" at least; "%2F" stays an escaped slash); the query
	// string is passed on unchanged.
	Path string
	// Prefix is the part of the incoming path that was cut off, sent on
	// as X-Forwarded-Prefix.
	Prefix string
}

// Options tune a Proxy. Zero values take the defaults in brackets.
type Options struct {
	// DialTimeout bounds connecting to the sandbox [10 s].
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers
	// after the request was sent [none: a request may legitimately run
	// for as long as its client waits, and the client's going away ends
	// it].
	ResponseHeaderTimeout time.Duration
	// MaxResponseHeaderBytes caps a response's headers [1 MiB].
	MaxResponseHeaderBytes int64
	// ErrorHandler writes the reply when the sandbox cannot be reached
	// [a JSON {"detail": ...} with 502].
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives proxy errors [slog.Default()].
	Logger *slog.Logger
}

// Proxy forwards requests to sandbox ports. It is safe for concurrent use.
type Proxy struct {
	rp     *httputil.ReverseProxy
	tr     *http.Transport
	ctx    context.Context // ends every forwarded request, upgrades included
	cancel context.CancelFunc
}

// targetKey carries the Target of a request through the reverse proxy.
type targetKey struct{}

// hostSuffix marks the synthetic host names that carry a target to the
// transport's dialer. The transport pools connections by host, so each
// sandbox port gets its own pool and a connection is never reused for
// another sandbox.
const hostSuffix = ".sandbox.sbx"

// New returns a proxy that reaches sandboxes through dial.
func New(dial DialFunc, o Options) *Proxy {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = 1 << 20
	}
	if o.ErrorHandler == nil {
		o.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "{\"detail\":%q}\n", err.Error())
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			id, port, err := parseHost(addr)
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
			defer cancel()
			return dial(ctx, id, port)
		},
		ResponseHeaderTimeout:  o.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: o.MaxResponseHeaderBytes,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		// Bodies pass through as they are: compressed or not is the
		// client's and the server's business.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{tr: tr, ctx: ctx, cancel: cancel}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(Target)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = formatHost(t.Sandbox, t.Port)
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.Path, ""
			if p, err := url.PathUnescape(t.Path); err == nil {
				pr.Out.URL.Path, pr.Out.URL.RawPath = p, t.Path
			}
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			// The client's Host goes on: the server in the sandbox builds
			// its URLs from it.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			if t.Prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", t.Prefix)
			}
		},
		Transport: tr,
		// Every write is flushed at once: event streams and chunked
		// downloads reach the client as the sandbox sends them.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client went away
			}
			o.Logger.Debug("portproxy: forward failed", "path", r.URL.Path, "err", err)
			o.ErrorHandler(w, r, err)
		},
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}
	return p
}

// Serve forwards r to t and writes the sandbox's answer to w. An upgrade
// (WebSocket) is spliced until either side closes it or the proxy is
// closed.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	if t.Path == "" || t.Path[0] != '/' {
		t.Path = "/" + t.Path
	}
	// Streams may last hours: no write deadline from the server, and the
	// request body may still be read while the response is written.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.EnableFullDuplex()
	ctx, stop := context.WithCancel(context.WithValue(r.Context(), targetKey{}, t))
	defer stop()
	unhook := context.AfterFunc(p.ctx, stop)
	defer unhook()
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// Close ends every request in flight, upgraded connections included, and
// drops idle connections to sandboxes.
func (p *Proxy) Close() {
	p.cancel()
	p.tr.CloseIdleConnections()
}

// CloseIdle drops idle connections to sandboxes (call it when a sandbox
// goes away).
func (p *Proxy) CloseIdle() { p.tr.CloseIdleConnections() }

// formatHost names a target as a host: the port, then the sandbox id in
// hex (any id is a valid host label that way).
func formatHost(id string, port int) string {
	return strconv.Itoa(port) + "." + hex.EncodeToString([]byte(id)) + hostSuffix
}

// parseHost reads the target back from the transport's "host:80" address.
func parseHost(addr string) (string, int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	rest, ok := strings.CutSuffix(host, hostSuffix)
	portStr, escaped, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return "", 0, fmt.Errorf("portproxy: bad target address %q", addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("portproxy: bad port in target address %q", addr)
	}
	id, err := hex.DecodeString(escaped)
	if err != nil || len(id) == 0 {
		return "", 0, fmt.Errorf("portproxy: bad sandbox in target address %q", addr)
	}
	return string(id), port, nil
}
