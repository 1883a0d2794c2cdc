package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// TestListenUnixWaitsForAStaleListener: a socket that accepts until its
// first probe (a server still going) is waited for and replaced; one
// that keeps accepting is refused, naming the process that holds it; a
// socket file nothing listens on is replaced at once.
func TestListenUnixWaitsForAStaleListener(t *testing.T) {
	defer func(d time.Duration) { staleSocketWait = d }(staleSocketWait)
	dir := t.TempDir()

	staleSocketWait = time.Minute // returns as soon as the holder lets go
	going := filepath.Join(dir, "going.sock")
	held, err := net.Listen("unix", going)
	if err != nil {
		t.Fatal(err)
	}
	held.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		if c, err := held.Accept(); err == nil {
			c.Close()
		}
		held.Close()
	}()
	ln, err := ListenUnix(going)
	if err != nil {
		t.Fatalf("a listener that stops: %v", err)
	}
	ln.Close()

	staleSocketWait = 300 * time.Millisecond
	busy := filepath.Join(dir, "busy.sock")
	keep, err := net.Listen("unix", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	_, err = ListenUnix(busy)
	if err == nil || !strings.Contains(err.Error(), "another server is listening") || !strings.Contains(err.Error(), fmt.Sprintf("PID %d ", os.Getpid())) {
		t.Fatalf("a listener that stays: %v, want it refused naming PID %d", err, os.Getpid())
	}

	stale := filepath.Join(dir, "stale.sock")
	old, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(stale); err != nil {
		t.Fatal(err)
	}
	ln, err = ListenUnix(stale)
	if err != nil {
		t.Fatalf("a stale socket file: %v", err)
	}
	ln.Close()
}

// A listener whose backlog is full (a busy server that has not accepted
// yet) still listens: its socket is neither removed nor replaced, and
// ListenUnix is refused, naming its holder.
func TestListenUnixKeepsABusyListener(t *testing.T) {
	defer func(d time.Duration) { staleSocketWait = d }(staleSocketWait)
	staleSocketWait = 300 * time.Millisecond
	path := filepath.Join(t.TempDir(), "busy.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	// A backlog of none: one connection waits to be accepted, and the
	// next finds the queue full.
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	waiting, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	if _, err := net.DialTimeout("unix", path, time.Second); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("a second connection to a full backlog: %v, want EAGAIN", err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenUnix(path)
	if err == nil {
		ln.Close()
		t.Fatal("ListenUnix took the socket of a busy listener")
	}
	if !strings.Contains(err.Error(), "another server is listening") || !strings.Contains(err.Error(), fmt.Sprintf("PID %d ", os.Getpid())) {
		t.Errorf("ListenUnix on a busy listener's socket: %v, want it refused naming PID %d", err, os.Getpid())
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("the busy listener's socket file was replaced or removed: %v", err)
	}
}
