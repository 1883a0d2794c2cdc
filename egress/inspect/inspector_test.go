package inspect

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	stdiotest "testing/iotest"
	"time"

	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/egress/tlsca"
)

// rig is an upstream HTTPS server for "api.test" with its own CA (the
// fake public CA), an Inspector trusting that CA, and a listener that
// hands every accepted connection to the Inspector as a sandbox's
// connection to api.test.
type rig struct {
	t         *testing.T
	upstream  *httptest.Server
	hits      atomic.Int64
	mu        sync.Mutex
	seen      []*http.Request
	bodies    []string // what each request's body held, as far as it came
	ins       *Inspector
	sandboxCA *x509.CertPool
	addr      string
	events    chan egress.AuditEvent
	conn      egress.Conn
}

func newRig(t *testing.T, host egress.HostPolicy, secrets []Secret, bound ...string) *rig {
	t.Helper()
	return newRigWith(t, nil, host, secrets, bound...)
}

// newRigWith is newRig with setup applied to the rig before it accepts
// its first connection (so that the serving goroutines see its changes).
func newRigWith(t *testing.T, setup func(*rig), host egress.HostPolicy, secrets []Secret, bound ...string) *rig {
	t.Helper()
	r := &rig{t: t, events: make(chan egress.AuditEvent, 100)}
	r.upstream = httptest.NewUnstartedServer(http.HandlerFunc(r.echo))
	r.upstream.EnableHTTP2 = true
	r.upstream.StartTLS()
	t.Cleanup(r.upstream.Close)
	// The upstream's certificate is for example.com; the rig's server
	// name is api.test, so take the upstream's name from its cert.
	roots := x509.NewCertPool()
	roots.AddCert(r.upstream.Certificate())
	dir := t.TempDir()
	ca, err := tlsca.New("sandbox1", []string{"example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := SaveSecrets(dir, secrets); err != nil {
		t.Fatal(err)
	}
	r.sandboxCA = x509.NewCertPool()
	r.sandboxCA.AddCert(ca.Certificate())
	r.ins = New(roots)
	t.Cleanup(func() { r.ins.Close() })
	upAddr := r.upstream.Listener.Addr().String()
	var bindings []egress.SecretBinding
	for _, b := range bound {
		bindings = append(bindings, egress.SecretBinding{Name: b, Hosts: []string{"example.com"}})
	}
	r.conn = egress.Conn{Sandbox: egress.SandboxRef{ID: "sandbox1", StateDir: dir}, SNI: "example.com", Port: 443, TLS: true,
		Host: host, Secrets: bindings,
		Dial: func(ctx context.Context, network string, port uint16) (net.Conn, error) {
			if port != 443 {
				return nil, fmt.Errorf("dial on port %d", port)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, upAddr)
		},
		Audit: func(e egress.AuditEvent) { r.events <- e },
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r.addr = ln.Addr().String()
	if setup != nil {
		setup(r)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = r.ins.Serve(context.Background(), c, r.conn) }()
		}
	}()
	return r
}

// echo answers with what it received; /ws upgrades and echoes bytes.
func (r *rig) echo(w http.ResponseWriter, req *http.Request) {
	r.hits.Add(1)
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.bodies = append(r.bodies, string(body))
	r.mu.Unlock()
	if req.URL.Path == "/ws" {
		if req.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "no upgrade", 400)
			return
		}
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "websocket")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		fmt.Fprintf(conn, "echo:%s", line)
		return
	}
	fmt.Fprintf(w, "proto=%s auth=%s query=%s body-secret=%s", req.Proto, req.Header.Get("Authorization"), req.URL.RawQuery, req.Header.Get("X-Echo"))
}

func (r *rig) client(protos ...string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.addr)
		},
		TLSClientConfig:   &tls.Config{RootCAs: r.sandboxCA, NextProtos: protos},
		ForceAttemptHTTP2: len(protos) == 0 || protos[0] == "h2",
	}}
}

func (r *rig) do(c *http.Client, method, url string, hdr http.Header) (int, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *rig) event() egress.AuditEvent {
	r.t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(5 * time.Second):
		r.t.Fatal("no audit event")
	}
	return egress.AuditEvent{}
}

func TestHTTP2ThroughInspection(t *testing.T) {
	r := newRig(t, egress.HostPolicy{Host: "example.com"}, nil)
	c := r.client()
	resp, err := c.Get("https://example.com/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || !strings.Contains(string(b), "proto=HTTP/2.0") {
		t.Fatalf("sandbox side %s, upstream saw %q", resp.Proto, b)
	}
	if resp.TLS.PeerCertificates[0].Issuer.CommonName == "" || !strings.HasPrefix(resp.TLS.PeerCertificates[0].Issuer.CommonName, "sbx sandbox CA") {
		t.Fatalf("served by %q", resp.TLS.PeerCertificates[0].Issuer.CommonName)
	}
	if e := r.event(); e.Decision != "allow" || e.Kind != "request" || e.Method != "GET" || e.Path != "/v1/models" || e.BytesDown == 0 {
		t.Fatalf("event %+v", e)
	}
}

func TestWebSocketThroughInspection(t *testing.T) {
	r := newRig(t, egress.HostPolicy{Host: "example.com", Rules: []egress.L7Rule{{Method: "GET", Path: "/ws"}}}, nil)
	conn, err := tls.Dial("tcp", r.addr, &tls.Config{ServerName: "example.com", RootCAs: r.sandboxCA, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	fmt.Fprint(conn, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo:hello\n" {
		t.Fatalf("read %q, %v", line, err)
	}
}

func TestL7RuleRefusesPost(t *testing.T) {
	r := newRig(t, egress.HostPolicy{Host: "example.com", Rules: []egress.L7Rule{{Method: "GET", Path: "/repos/**"}}}, nil)
	c := r.client()
	if code, _ := r.do(c, "GET", "https://example.com/repos/a/b", nil); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	if e := r.event(); e.Rule != "GET /repos/**" || e.Decision != "allow" {
		t.Fatalf("event %+v", e)
	}
	hits := r.hits.Load()
	code, body := r.do(c, "POST", "https://example.com/repos/a/b", nil)
	if code != http.StatusForbidden || !strings.Contains(body, "no rule") {
		t.Fatalf("POST: %d %q", code, body)
	}
	if r.hits.Load() != hits {
		t.Fatal("the refused POST reached the host")
	}
	if e := r.event(); e.Decision != "deny" || e.Method != "POST" || !strings.Contains(e.Reason, "no rule") {
		t.Fatalf("event %+v", e)
	}
	// Paths with dot or empty segments are refused, whatever the rules.
	for _, p := range []string{"/repos/%2e%2e/admin", "/repos//x", "/repos/./x"} {
		req, _ := http.NewRequest("GET", "https://example.com/", nil)
		req.URL.Opaque = p
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
		r.event()
	}
	if r.hits.Load() != hits {
		t.Fatal("a path trick reached the host")
	}
}

func TestAuditModeLetsMissesThrough(t *testing.T) {
	r := newRig(t, egress.HostPolicy{Host: "example.com", Rules: []egress.L7Rule{{Method: "GET", Path: "/"}}, Audit: true}, nil)
	if code, _ := r.do(r.client(), "DELETE", "https://example.com/x", nil); code != 200 {
		t.Fatalf("DELETE in audit mode: %d", code)
	}
	if e := r.event(); e.Decision != "audit" {
		t.Fatalf("event %+v", e)
	}
}

func TestHostMustEqualSNI(t *testing.T) {
	r := newRig(t, egress.HostPolicy{Host: "example.com"}, nil)
	for _, host := range []string{"evil.test", "example.com:8443"} {
		code, _ := r.do(r.client(), "GET", "https://example.com/", http.Header{})
		if code != 200 {
			t.Fatalf("plain GET %d", code)
		}
		r.event()
		req, _ := http.NewRequest("GET", "https://example.com/", nil)
		req.Host = host
		resp, err := r.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("Host %s: %d", host, resp.StatusCode)
		}
		if e := r.event(); e.Decision != "deny" || !strings.Contains(e.Reason, "misdirected") {
			t.Fatalf("event %+v", e)
		}
	}
}

func TestSecretSubstitutedAndScrubbed(t *testing.T) {
	ph, err := NewPlaceholder("sk-")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewPlaceholder("")
	const value = "real-secret-value-42"
	secrets := []Secret{
		{Name: "API_KEY", Placeholder: ph, Value: value},
		{Name: "OTHER", Placeholder: other, Value: "other-value"},
	}
	r := newRig(t, egress.HostPolicy{}, secrets, "API_KEY")
	c := r.client()
	code, body := r.do(c, "GET", "https://example.com/x?key="+ph, http.Header{"Authorization": {"Bearer " + ph}})
	if code != 200 {
		t.Fatalf("status %d %q", code, body)
	}
	r.mu.Lock()
	up := r.seen[len(r.seen)-1]
	r.mu.Unlock()
	if up.Header.Get("Authorization") != "Bearer "+value || up.URL.Query().Get("key") != value {
		t.Fatalf("upstream got %q %q", up.Header.Get("Authorization"), up.URL.RawQuery)
	}
	if strings.Contains(body, value) || !strings.Contains(body, "auth=Bearer "+ph) {
		t.Fatalf("the value came back to the sandbox: %q", body)
	}
	if e := r.event(); e.Decision != "allow" || e.Rule != "example.com" || strings.Contains(fmt.Sprint(e), value) {
		t.Fatalf("event %+v", e)
	}
	// Basic auth, as git sends it.
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ph))
	if code, _ := r.do(c, "GET", "https://example.com/git", http.Header{"Authorization": {basic}}); code != 200 {
		t.Fatal(code)
	}
	r.event()
	r.mu.Lock()
	up = r.seen[len(r.seen)-1]
	r.mu.Unlock()
	if u, p, ok := up.BasicAuth(); !ok || u != "x-access-token" || p != value {
		t.Fatalf("basic auth upstream %q %q", u, p)
	}
	// Another secret's placeholder, and an unknown one, are refused.
	hits := r.hits.Load()
	unknown, _ := NewPlaceholder("")
	for _, p := range []string{other, unknown} {
		code, body := r.do(c, "GET", "https://example.com/", http.Header{"X-Key": {p}})
		if code != http.StatusForbidden {
			t.Fatalf("foreign placeholder: %d %q", code, body)
		}
		if e := r.event(); e.Decision != "deny" || !strings.Contains(e.Reason, "placeholder") {
			t.Fatalf("event %+v", e)
		}
	}
	if r.hits.Load() != hits {
		t.Fatal("a refused request reached the host")
	}
}

func TestSecretNeverSentToAnUnverifiedHost(t *testing.T) {
	ph, _ := NewPlaceholder("")
	untrusting := func(r *rig) { r.ins.roots = x509.NewCertPool() } // trusts nothing
	r := newRigWith(t, untrusting, egress.HostPolicy{}, []Secret{{Name: "K", Placeholder: ph, Value: "v"}}, "K")
	code, _ := r.do(r.client(), "GET", "https://example.com/", http.Header{"Authorization": {ph}})
	if code != http.StatusBadGateway || r.hits.Load() != 0 {
		t.Fatalf("status %d, upstream hits %d", code, r.hits.Load())
	}
	if e := r.event(); !strings.Contains(e.Reason, "upstream") {
		t.Fatalf("event %+v", e)
	}
}

func TestScrubberAcrossReads(t *testing.T) {
	sc := newScrubber([]Secret{{Placeholder: "PH", Value: "abcdef"}})
	src := strings.Repeat("x", 32<<10-3) + "abcdef-abcdef"
	b, err := io.ReadAll(sc.body(io.NopCloser(iotest{strings.NewReader(src)})))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("x", 32<<10-3) + "PH-PH"; string(b) != want {
		t.Fatalf("got tail %q", b[len(b)-10:])
	}
}

// iotest reads at most 7 bytes at a time, to split values across reads.
type iotest struct{ r io.Reader }

func (i iotest) Read(p []byte) (int, error) { return i.r.Read(p[:min(len(p), 7)]) }

// TestPlaceholderInBodyRefused: placeholders are replaced in headers and
// the query only; a request body that carries one (of a secret bound to
// the host or not) is refused with 403 and audited, and the host never
// receives it; a body without one goes through.
func TestPlaceholderInBodyRefused(t *testing.T) {
	ph, _ := NewPlaceholder("sk-")
	unknown, _ := NewPlaceholder("")
	r := newRig(t, egress.HostPolicy{}, []Secret{{Name: "K", Placeholder: ph, Value: "v"}}, "K")
	c := r.client()
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := c.Post("https://example.com/upload", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"text":"hello"}`); code != 200 {
		t.Fatalf("a body without a placeholder: %d %q", code, body)
	}
	if e := r.event(); e.Decision != "allow" || e.BytesUp != 16 {
		t.Fatalf("event %+v", e)
	}
	big := strings.Repeat("x", 256<<10)
	for _, body := range []string{`{"key":"` + ph + `"}`, big + unknown + big} {
		code, reply := post(body)
		if code != http.StatusForbidden || !strings.Contains(reply, "placeholder") {
			t.Errorf("a body with a placeholder: %d %q", code, reply)
		}
		if e := r.event(); e.Decision != "deny" || !strings.Contains(e.Reason, "request body carries") {
			t.Errorf("event %+v", e)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if strings.Contains(b, PlaceholderTag) {
			t.Errorf("the host received a placeholder in a body (%d bytes)", len(b))
		}
	}
}

// TestBodyScanAcrossReads: a placeholder split over many small reads is
// found, and the reads stop before all of it has passed.
func TestBodyScanAcrossReads(t *testing.T) {
	ph, _ := NewPlaceholder("")
	data := strings.Repeat("y", 1000) + ph + "tail"
	b := &countingBody{rc: io.NopCloser(stdiotest.OneByteReader(strings.NewReader(data))), secrets: []Secret{{Name: "K", Placeholder: ph}}}
	got, err := io.ReadAll(b)
	if err != errBodyPlaceholder || strings.Contains(string(got), ph) || !strings.Contains(b.refused(), "secret K") {
		t.Fatalf("read %d bytes, err %v, reason %q", len(got), err, b.refused())
	}
	clean := &countingBody{rc: io.NopCloser(stdiotest.HalfReader(strings.NewReader(data[:1000] + PlaceholderTag + "tail"))), secrets: b.secrets}
	if got, err := io.ReadAll(clean); err != nil || len(got) != 1000+len(PlaceholderTag)+4 {
		t.Fatalf("a body with only the tag: %d bytes, %v", len(got), err)
	}
}
