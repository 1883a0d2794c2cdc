package inspect

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sbxrun/sbx/egress"
)

type eventKey struct{}

// bodyKey holds a request's *countingBody in its context.
type bodyKey struct{}

// serveHTTP checks one request of a handed connection and forwards it.
func (i *Inspector) serveHTTP(w http.ResponseWriter, r *http.Request) {
	hc, _ := r.Context().Value(connKey{}).(*handedConn)
	if hc == nil {
		http.Error(w, "sbx egress: no connection", http.StatusInternalServerError)
		return
	}
	c := hc.c
	ev := &egress.AuditEvent{Time: time.Now(), Sandbox: c.Sandbox.ID, Name: c.SNI, Kind: "request",
		Method: r.Method, Path: r.URL.Path, Rule: ruleOf(c), Decision: "allow"}
	cw := &countingWriter{ResponseWriter: w}
	body := &countingBody{rc: r.Body, secrets: hc.st.secrets}
	r.Body = body
	defer func() {
		ev.BytesUp, ev.BytesDown = body.n.Load(), cw.n
		if c.Audit != nil {
			c.Audit(*ev)
		}
	}()
	if reason := i.check(r, c, ev); reason != "" {
		status := http.StatusForbidden
		if strings.HasPrefix(reason, "misdirected") {
			status = http.StatusMisdirectedRequest
		}
		ev.Decision, ev.Reason = "deny", reason
		http.Error(cw, "sbx egress policy: "+reason, status)
		return
	}
	if err := substitute(r, hc.st.secrets, c.Secrets, c.TLS); err != nil {
		ev.Decision, ev.Reason = "deny", err.Error()
		http.Error(cw, "sbx egress policy: "+err.Error(), http.StatusForbidden)
		return
	}
	ctx := context.WithValue(context.WithValue(r.Context(), eventKey{}, ev), bodyKey{}, body)
	hc.proxy.ServeHTTP(cw, r.WithContext(ctx))
	if reason := body.refused(); reason != "" {
		ev.Decision, ev.Reason = "deny", reason
	}
}

// check applies the host and L7 checks to r; it returns why r is refused,
// or "". An L7 miss in audit mode is let through, marked in ev.
func (i *Inspector) check(r *http.Request, c egress.Conn, ev *egress.AuditEvent) string {
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = h, p
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host != c.SNI {
		return "misdirected request: Host " + strconv.Quote(r.Host) + " is not the server name " + c.SNI
	}
	if port != "" && port != strconv.Itoa(int(c.Port)) {
		return "misdirected request: Host " + strconv.Quote(r.Host) + " names another port than " + strconv.Itoa(int(c.Port))
	}
	if !cleanPath(r.URL.Path) {
		return "the path " + strconv.Quote(r.URL.Path) + " has dot or empty segments"
	}
	if len(c.Host.Rules) == 0 {
		return ""
	}
	for _, rule := range c.Host.Rules {
		if rule.Match(r.Method, r.URL.Path) {
			ev.Rule = rule.String()
			return ""
		}
	}
	if c.Host.Audit {
		ev.Decision, ev.Reason = "audit", "no rule of "+c.Host.Host+" allows "+r.Method+" "+r.URL.Path
		return ""
	}
	return "no rule of " + c.Host.Host + " allows " + r.Method + " " + r.URL.Path
}

// ruleOf is the policy entry a request on c is allowed by before the L7
// rules are looked at: the host's pattern, or the server name when only
// secrets make the host inspected.
func ruleOf(c egress.Conn) string {
	if c.Host.Host != "" {
		return c.Host.Host
	}
	return c.SNI
}

// cleanPath reports whether p is absolute and has no ".", ".." or empty
// segments (a trailing slash is fine), so that the path a rule matched is
// the path the host serves.
func cleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	return p == "/" || path.Clean(p) == strings.TrimSuffix(p, "/")
}

// newProxy is the reverse proxy of one handed connection: it reaches the
// real host through the connection's dial function, over TLS verified
// against the inspector's roots when the sandbox spoke TLS.
func (i *Inspector) newProxy(hc *handedConn) http.Handler {
	c := hc.c
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return c.Dial(ctx, network, c.Port)
		},
		TLSClientConfig:       &tls.Config{ServerName: c.SNI, RootCAs: i.roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	go func() { <-hc.done; tr.CloseIdleConnections() }()
	scheme, authority := "http", c.SNI
	if c.TLS {
		scheme = "https"
	}
	if (c.TLS && c.Port != 443) || (!c.TLS && c.Port != 80) {
		authority = net.JoinHostPort(c.SNI, strconv.Itoa(int(c.Port)))
	}
	scrub := hc.st.scrub
	return &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, authority, ""
			if scrub != nil {
				// The transport asks for gzip itself and decodes it, so
				// the body can be scrubbed.
				pr.Out.Header.Del("Accept-Encoding")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if scrub == nil {
				return nil
			}
			scrub.headers(resp.Header)
			scrub.headers(resp.Trailer)
			if resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil && resp.Body != http.NoBody {
				resp.Body = scrub.body(resp.Body)
				resp.Header.Del("Content-Length")
				resp.ContentLength = -1
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if ev, ok := r.Context().Value(eventKey{}).(*egress.AuditEvent); ok {
				ev.Reason = "upstream: " + err.Error()
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			if b, ok := r.Context().Value(bodyKey{}).(*countingBody); ok && b.refused() != "" {
				http.Error(w, "sbx egress policy: "+b.refused(), http.StatusForbidden)
				return
			}
			http.Error(w, "sbx egress: "+c.SNI+" could not be reached", http.StatusBadGateway)
		},
	}
}

// countingWriter counts the bytes of a response body and its status.
type countingWriter struct {
	http.ResponseWriter
	n      int64
	status int
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingBody counts the bytes of a request body and, when the sandbox
// has secrets, refuses one that carries a placeholder: placeholders are
// replaced in headers and the query only, and a body is never looked
// into for them, so a placeholder there is a mistake or a probe. The
// read that would pass it fails, which aborts the request upstream
// before the placeholder is sent (at most its first bytes, split across
// two reads, went before).
type countingBody struct {
	rc      io.ReadCloser
	n       atomic.Int64
	secrets []Secret
	tail    []byte // the last bytes passed, for a placeholder split across reads
	reason  atomic.Pointer[string]
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.refused() != "" {
		return 0, errBodyPlaceholder
	}
	n, err := b.rc.Read(p)
	if n > 0 && len(b.secrets) > 0 {
		if reason := b.scan(p[:n]); reason != "" {
			b.reason.Store(&reason)
			return 0, errBodyPlaceholder
		}
	}
	b.n.Add(int64(n))
	return n, err
}

// errBodyPlaceholder ends the read of a request body that carries a
// placeholder.
var errBodyPlaceholder = errors.New("the request body carries a secret placeholder")

// placeholderLen is the length of a placeholder's tag and random part.
const placeholderLen = len(PlaceholderTag) + 32

// scan looks for a placeholder in the bytes p that follow the tail; it
// returns why the body is refused, or "".
func (b *countingBody) scan(p []byte) string {
	const keep = placeholderLen - 1
	joint := append(b.tail, p[:min(len(p), keep)]...)
	ph := placeholderRE().Find(joint)
	if ph == nil {
		ph = placeholderRE().Find(p)
	}
	if ph != nil {
		for _, s := range b.secrets {
			if s.tag() == string(ph) {
				return "the request body carries the placeholder of secret " + s.Name + ": placeholders are replaced in headers and the query only"
			}
		}
		return "the request body carries an unknown secret placeholder"
	}
	if len(p) >= keep {
		joint = p
	}
	b.tail = append(b.tail[:0], joint[max(0, len(joint)-keep):]...)
	return ""
}

// refused is why the body was refused, or "".
func (b *countingBody) refused() string {
	if r := b.reason.Load(); r != nil {
		return *r
	}
	return ""
}

func (b *countingBody) Close() error { return b.rc.Close() }
