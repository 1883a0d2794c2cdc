package executor

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestDrainClosesIdleConnections: a checkpoint waits until the executor's
// side of every other connection is closed, whether it served a request
// (kept alive) or never sent one.
func TestDrainClosesIdleConnections(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/sock")
	if err != nil {
		t.Fatal(err)
	}
	conns := newConnTracker()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	srv.ConnState, srv.ConnContext = conns.hook, conns.context
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	silent, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	kept, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if _, err := io.WriteString(kept, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(kept)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for end := time.Now().Add(5 * time.Second); ; {
		conns.mu.Lock()
		n := len(conns.conns)
		conns.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the server tracks %d connections, want 2", n)
		}
		time.Sleep(5 * time.Millisecond)
	}

	srv.SetKeepAlivesEnabled(false)
	if left := conns.drain(context.Background(), 5*time.Second); left != 0 {
		t.Fatalf("drain left %d connections open", left)
	}
	for name, c := range map[string]io.Reader{"silent": silent, "kept": br} {
		_ = kept.SetReadDeadline(time.Now().Add(5 * time.Second))
		_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("%s connection: read %d bytes, %v; want EOF (closed by the server)", name, n, err)
		}
	}
}
