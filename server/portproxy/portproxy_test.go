package portproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// world maps (sandbox, port) to real listeners on 127.0.0.1, standing in
// for ports inside sandboxes, and counts dials.
type world struct {
	mu    sync.Mutex
	addrs map[string]string
	dials atomic.Int64
}

func (w *world) add(t *testing.T, id string, port int, h http.Handler) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.addrs == nil {
		w.addrs = map[string]string{}
	}
	w.addrs[fmt.Sprintf("%s:%d", id, port)] = srv.Listener.Addr().String()
}

func (w *world) dial(ctx context.Context, id string, port int) (net.Conn, error) {
	w.dials.Add(1)
	w.mu.Lock()
	addr, ok := w.addrs[fmt.Sprintf("%s:%d", id, port)]
	w.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sandbox %s has nothing on port %d", id, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// front is the server the client talks to: /<id>/<port>/<path> goes to
// port of sandbox id. Its timeouts are short, to show that streams and
// upgrades outlive them.
func front(t *testing.T, p *Proxy) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/", 3)
		var port int
		fmt.Sscan(parts[1], &port)
		rest := ""
		if len(parts) == 3 {
			rest = parts[2]
		}
		p.Serve(w, r, Target{Sandbox: parts[0], Port: port, Path: "/" + rest, Prefix: "/" + parts[0] + "/" + parts[1]})
	}))
	srv.Config.ReadTimeout = 500 * time.Millisecond
	srv.Config.WriteTimeout = 500 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

const longID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestProxyPassesRequestsUnchanged(t *testing.T) {
	var w world
	for _, id := range []string{longID, "other"} {
		w.add(t, id, 60000, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			rw.Header().Add("Set-Cookie", "a=1")
			rw.Header().Add("Set-Cookie", "b=2")
			rw.Header().Set("X-Sandbox", id)
			rw.WriteHeader(http.StatusTeapot)
			json.NewEncoder(rw).Encode(map[string]any{
				"method": r.Method, "path": r.URL.EscapedPath(), "rawquery": r.URL.RawQuery, "host": r.Host,
				"key": r.Header.Get("X-Session-API-Key"), "multi": r.Header.Values("X-Multi"),
				"prefix": r.Header.Get("X-Forwarded-Prefix"), "xff": r.Header.Get("X-Forwarded-For"),
				"body": string(body),
			})
		}))
	}
	p := New(w.dial, Options{})
	defer p.Close()
	f := front(t, p)
	req, _ := http.NewRequest("POST", f.URL+"/"+longID+"/60000/api/file/up%2Fload?path=%2Fwork%20space%2Fa.txt&x=1&x=2", strings.NewReader("payload"))
	req.Header.Set("X-Session-API-Key", "k3y")
	req.Header.Add("X-Multi", "one")
	req.Header.Add("X-Multi", "two")
	req.Header.Set("X-Forwarded-For", "203.0.113.66") // a client cannot forge it
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Sandbox") != longID || len(resp.Header.Values("Set-Cookie")) != 2 {
		t.Fatalf("response: %d %v", resp.StatusCode, resp.Header)
	}
	want := map[string]any{"method": "POST", "path": "/api/file/up%2Fload", "rawquery": "path=%2Fwork%20space%2Fa.txt&x=1&x=2",
		"host": strings.TrimPrefix(f.URL, "http://"), "key": "k3y", "multi": []any{"one", "two"}, "prefix": "/" + longID + "/60000",
		"xff": "127.0.0.1", "body": "payload"}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	// Kept-alive connections never cross sandboxes.
	for i := 0; i < 6; i++ {
		id := []string{longID, "other"}[i%2]
		resp, err := f.Client().Get(f.URL + "/" + id + "/60000/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("X-Sandbox") != id {
			t.Fatalf("request for %s answered by %s", id, resp.Header.Get("X-Sandbox"))
		}
	}
	if n := w.dials.Load(); n > 3 {
		t.Errorf("%d dials for 7 sequential requests to 2 sandboxes: connections are not reused", n)
	}
	// Nothing listening: a 502 that says why, as JSON.
	resp, err = f.Client().Get(f.URL + "/other/60001/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"detail":`) || !strings.Contains(string(body), "port 60001") {
		t.Fatalf("unreachable port: %d %s", resp.StatusCode, body)
	}
}

func TestProxyStreamsBothWays(t *testing.T) {
	var w world
	next := make(chan struct{})
	w.add(t, "sb", 60000, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/events": // a server-sent stream, longer than the front's write timeout
			rw.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(rw, "data: %d\n\n", i)
				rw.(http.Flusher).Flush()
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
		case "/echo": // echoes each line of the request body as it arrives
			http.NewResponseController(rw).EnableFullDuplex()
			rw.WriteHeader(http.StatusOK)
			rw.(http.Flusher).Flush()
			sc := bufio.NewScanner(r.Body)
			for sc.Scan() {
				fmt.Fprintf(rw, "echo %s\n", sc.Text())
				rw.(http.Flusher).Flush()
			}
		}
	}))
	p := New(w.dial, Options{})
	defer p.Close()
	f := front(t, p)

	resp, err := f.Client().Get(f.URL + "/sb/60000/events")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
		time.Sleep(300 * time.Millisecond) // 900 ms in all: past the front's 500 ms write timeout
		next <- struct{}{}
	}
	resp.Body.Close()

	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", f.URL+"/sb/60000/echo", pr)
	resp, err = f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br = bufio.NewReader(resp.Body)
	respCh := make(chan struct{})
	go func() {
		defer close(respCh)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(pw, "line%d\n", i)
			// The answer to this line arrives before the next is sent.
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("echo line%d\n", i) {
				t.Errorf("echo %d: %q %v", i, line, err)
				return
			}
		}
		pw.Close()
	}()
	select {
	case <-respCh:
	case <-time.After(20 * time.Second):
		t.Fatal("full-duplex stream stalled")
	}
}

func TestProxyWebSocket(t *testing.T) {
	var w world
	w.add(t, "sb", 60000, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sockets/events/abc" || r.URL.Query().Get("resend_all") != "true" {
			http.Error(rw, "wrong path "+r.URL.String(), http.StatusNotFound)
			return
		}
		c, err := websocket.Accept(rw, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(2 << 20)
		ctx := r.Context()
		// First-frame auth, as the Agent Server does it.
		_, msg, err := c.Read(ctx)
		if err != nil || string(msg) != `{"type":"auth","session_api_key":"k"}` {
			c.Close(4001, "auth")
			return
		}
		for {
			typ, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, append([]byte("ack:"), msg...)); err != nil {
				return
			}
		}
	}))
	p := New(w.dial, Options{})
	f := front(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.URL, "http")+"/sb/60000/sockets/events/abc?resend_all=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","session_api_key":"k"}`))
	for i := 0; i < 3; i++ {
		payload := []byte(fmt.Sprintf("event %d", i))
		if i == 2 {
			payload = []byte(strings.Repeat("z", 1<<20)) // a large binary frame
		}
		if err := c.Write(ctx, websocket.MessageBinary, payload); err != nil {
			t.Fatal(err)
		}
		c.SetReadLimit(2 << 20)
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "ack:"+string(payload) {
			t.Fatalf("frame %d: %.40q %v", i, got, err)
		}
		time.Sleep(400 * time.Millisecond) // outlive the front's read and write timeouts
	}
	// Closing the proxy ends the upgraded connection.
	p.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, _, err := c.Read(rctx); err == nil || rctx.Err() != nil {
		t.Fatalf("read after the proxy closed: %v (ctx %v)", err, rctx.Err())
	}
}

func TestParseHostRoundTrip(t *testing.T) {
	for _, id := range []string{longID, "a.b:c/d", "x"} {
		gotID, port, err := parseHost(formatHost(id, 12001) + ":80")
		if err != nil || gotID != id || port != 12001 {
			t.Errorf("%q: %q %d %v", id, gotID, port, err)
		}
	}
	for _, bad := range []string{"evil.com:80", "99999.61.sandbox.sbx:80", "1.zz.sandbox.sbx:80", "80.sandbox.sbx:80"} {
		if _, _, err := parseHost(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
