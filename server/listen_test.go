package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeUntilCancelled: Serve answers on its listeners until the
// context ends, then returns nil with the listeners closed.
func TestServeUntilCancelled(t *testing.T) {
	s, _ := newTestServer(t, nil)
	ln, err := ListenTCP("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, []net.Listener{ln}, 5*time.Second) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz while serving: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after Serve returned")
	}
}

func TestListenTCPAndReadTokenRefuse(t *testing.T) {
	if _, err := ListenTCP("127.0.0.1:0", "cert.pem", ""); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("a certificate without its key: %v", err)
	}
	if _, err := ListenTCP("127.0.0.1:0", "/nonexistent/cert.pem", "/nonexistent/key.pem"); err == nil || !strings.Contains(err.Error(), "TLS certificate") {
		t.Errorf("a missing certificate: %v", err)
	}
	dir := t.TempDir()
	short, good := filepath.Join(dir, "short"), filepath.Join(dir, "good")
	_ = os.WriteFile(short, []byte("abc\n"), 0o600)
	_ = os.WriteFile(good, []byte(" 0123456789abcdef0123\n"), 0o600)
	if _, err := ReadToken(short); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("a short token: %v", err)
	}
	if tok, err := ReadToken(good); err != nil || tok != "0123456789abcdef0123" {
		t.Errorf("a good token: %q %v", tok, err)
	}
}
