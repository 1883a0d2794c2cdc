package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// hostile is a client of an executor that answers with h. Its calls'
// deadlines are long enough for a loaded machine (reading a reply of
// megabytes under the race detector takes longer than a second): the
// replies' contents, not the clock, decide what the tests see.
func hostile(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	return hostileWith(t, h, Options{Timeout: 30 * time.Second, Grace: 30 * time.Second, TransferTimeout: 30 * time.Second})
}

// hostileWith is hostile with the client's options opts.
func hostileWith(t *testing.T, h http.HandlerFunc, opts Options) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := New(sock, opts)
	t.Cleanup(c.Close)
	return c
}

func TestClientDeadlineOnSilentExecutor(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := hostileWith(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, Options{Timeout: 300 * time.Millisecond, Grace: 300 * time.Millisecond, TransferTimeout: time.Second})
	if _, err := c.Health(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("health: %v", err)
	}
	// A session run waits its own timeout plus the grace, then gives up.
	start := time.Now()
	if _, err := c.Run(context.Background(), "x", api.RunRequest{Command: "true", TimeoutS: 0.2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("run: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("run outlived its deadline")
	}
	// A stream that stalls mid-way ends at the deadline as well.
	if _, err := c.ExecStream(context.Background(), api.ExecRequest{Argv: []string{"x"}, Timeout: 100 * time.Millisecond}, func(api.ExecFrame) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stream: %v", err)
	}
}

func TestClientCapsReplies(t *testing.T) {
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.RawQuery, "stream"):
			io.WriteString(w, `{"type":"stdout","data":"`+strings.Repeat("a", 4<<20)+`"}`+"\n")
		case r.URL.Path == api.PathFiles:
			io.WriteString(w, strings.Repeat("b", 1<<20))
		default:
			io.WriteString(w, `{"status":"`+strings.Repeat("c", 8<<20)+`"}`)
		}
	})
	ctx := context.Background()
	if _, err := c.Health(ctx); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("health: %v", err)
	}
	if _, err := c.ReadFile(ctx, "/f", io.Discard, 1000); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("read: %v", err)
	}
	if n, err := c.ReadFile(ctx, "/f", io.Discard, 1<<20); err != nil || n != 1<<20 {
		t.Fatalf("read at exactly the cap: %d %v", n, err)
	}
	if _, err := c.ExecStream(ctx, api.ExecRequest{Argv: []string{"x"}}, func(api.ExecFrame) error { return nil }); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("stream: %v", err)
	}
}

func TestClientDecodesErrors(t *testing.T) {
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.PathHealth {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>not json</html>")
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":{"code":"multiple_matches","message":"twice","lines":[2,4]}}`)
	})
	_, err := c.Edit(context.Background(), api.EditRequest{Command: "str_replace"})
	var e *Error
	if !errors.As(err, &e) || e.Code != api.CodeMultiMatch || e.Status != 422 || len(e.Lines) != 2 {
		t.Fatalf("edit: %#v", err)
	}
	if _, err := c.Health(context.Background()); !errors.As(err, &e) || e.Status != 502 || e.Code != api.CodeInternal {
		t.Fatalf("health: %#v", err)
	}
}

func TestListenFileAcceptsBeforeAnyServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "e.sock")
	f, err := ListenFile(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A connection is queued before anything serves.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial before serving: %v", err)
	}
	conn.Close()
	// Serving on the passed file answers the client.
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"ok","version":"t","uptime_s":1}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := New(sock, Options{Timeout: 5 * time.Second})
	defer c.Close()
	if h, err := c.Health(context.Background()); err != nil || h.Status != "ok" {
		t.Fatalf("health: %+v %v", h, err)
	}
	// A stale socket is replaced.
	f2, err := ListenFile(sock)
	if err != nil {
		t.Fatalf("replace stale socket: %v", err)
	}
	f2.Close()
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args("/.sbx/sbx", "1000:1000", []string{"A=1", "B=2"}, "/work"), " ")
	if got != "/.sbx/sbx executor --listen-fd 3 --user 1000:1000 --env A=1 --env B=2 --workdir /work" {
		t.Fatal(got)
	}
	if got := strings.Join(Args("/.sbx/sbx", "", nil, ""), " "); got != "/.sbx/sbx executor --listen-fd 3" {
		t.Fatal(got)
	}
}

// TestAttachHostileExecutor checks the attach client against an executor
// that refuses the upgrade, and one that sends a frame over the cap.
func TestAttachHostileExecutor(t *testing.T) {
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"code":"busy","message":"no"}}`)
	})
	if _, err := c.Attach(context.Background(), api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sh"}}}); !IsCode(err, "busy") {
		t.Fatalf("attach refused: %v", err)
	}
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: sbx-attach\r\n\r\n")
		_, _ = conn.Write([]byte{api.AttachStdout, 0x7f, 0xff, 0xff, 0xff})
		time.Sleep(100 * time.Millisecond)
	})
	a, err := c.Attach(context.Background(), api.AttachRequest{ExecRequest: api.ExecRequest{Argv: []string{"sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Wait(io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized frame: %v", err)
	}
}

// A transfer during which the executor stops sending (or stops reading)
// ends after the idle timeout, long before the transfer timeout.
func TestClientTransferIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			io.WriteString(w, "some bytes, then silence")
			w.(http.Flusher).Flush()
		}
		select { // neither sends more nor reads the upload
		case <-release:
		case <-r.Context().Done():
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := New(sock, Options{IdleTimeout: 300 * time.Millisecond, TransferTimeout: time.Hour})
	defer c.Close()
	start := time.Now()
	if _, err := c.GetArchive(context.Background(), "/x", io.Discard, 1<<20); err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("download: %v", err)
	}
	big := strings.NewReader(strings.Repeat("x", 64<<20)) // more than the socket buffers
	if _, err := c.PutArchive(context.Background(), "/x", big); err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("upload: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Strings and numbers the executor chooses reach the caller safe to print
// and to pass on: no escape sequences, exit codes of a process.
func TestClientSanitizesWhatTheExecutorSays(t *testing.T) {
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.PathExec {
			io.WriteString(w, `{"exit_code":-7,"signal":"\u001b[2Jmany more bytes"}`)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"code":"bad\u001b[31m","message":"\u001b]0;owned\u0007 `+strings.Repeat("m", 10000)+`"}}`)
	})
	_, err := c.Health(context.Background())
	var e *Error
	if !errors.As(err, &e) || strings.ContainsAny(e.Message+e.Code, "\x1b\x07") || len(e.Message) > 4096 {
		t.Fatalf("error %q %q", e.Code, e.Message)
	}
	res, err := c.Exec(context.Background(), api.ExecRequest{Argv: []string{"x"}})
	if err != nil || res.ExitCode != 255 || strings.ContainsRune(res.Signal, 0x1b) || len(res.Signal) > 16 {
		t.Fatalf("result %+v %v", res, err)
	}
}
