package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// rawExecutor serves each connection with serve, counting connections.
func rawExecutor(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) (*Client, *atomic.Int32) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	c := New(sock, Options{Timeout: 2 * time.Second})
	t.Cleanup(c.Close)
	return c, &conns
}

// eachRequest serves the requests of a connection with handle until it
// returns false.
func eachRequest(handle func(conn net.Conn, req *http.Request) bool) func(net.Conn, *bufio.Reader) {
	return func(conn net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if !handle(conn, req) {
				return
			}
		}
	}
}

const healthReply = `{"status":"ok","version":"t","uptime_s":1}`

func reply(conn net.Conn, body string, headers ...string) {
	fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s", len(body), strings.Join(headers, ""), body)
}

// JSON calls keep their connection open and reuse it, one call after the
// other, as long as the executor keeps it.
func TestClientReusesConnections(t *testing.T) {
	c, conns := rawExecutor(t, eachRequest(func(conn net.Conn, req *http.Request) bool {
		if req.URL.Path == api.PathExec {
			reply(conn, `{"exit_code":3}`+"\n")
			return true
		}
		reply(conn, healthReply+"\n")
		return true
	}))
	ctx := context.Background()
	for i := range 20 {
		if i%2 == 0 {
			if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
				t.Fatalf("health %d: %+v %v", i, h, err)
			}
		} else if res, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}}); err != nil || res.ExitCode != 3 {
			t.Fatalf("exec %d: %+v %v", i, res, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 calls used %d connections, want 1", n)
	}
}

// A kept-alive connection that the executor closed between calls (or one
// it asked to close) is not used again: the next call goes out on a new
// connection and succeeds.
func TestClientRedialsClosedConnections(t *testing.T) {
	closed := make(chan struct{}, 10)
	c, conns := rawExecutor(t, func(conn net.Conn, br *bufio.Reader) {
		defer func() { closed <- struct{}{} }()
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if req.URL.Query().Get("close") != "" {
			reply(conn, healthReply, "Connection: close\r\n")
		} else {
			reply(conn, healthReply) // then closes without saying so
		}
		conn.Close()
	})
	ctx := context.Background()
	waitClosed := func() {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the executor never closed the connection")
		}
	}
	for i := range 5 {
		if res, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %d: %+v %v", i, res, err)
		}
		waitClosed()
	}
	var h api.Health
	if err := c.call(ctx, time.Second, http.MethodGet, api.PathHealth+"?close=1", nil, &h, 1<<10); err != nil || h.Status != "ok" {
		t.Fatalf("health with Connection: close: %+v %v", h, err)
	}
	waitClosed()
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("health after Connection: close: %v", err)
	}
	if n := conns.Load(); n != 7 {
		t.Fatalf("%d connections for 7 calls on connections closed after each", n)
	}
}

// A GET whose kept-alive connection the executor closes without a reply
// (as it does at its idle timeout) is sent again on a new connection; a
// POST (an exec that may have started) is not.
func TestClientRetriesOnlyGetsOnSilentClose(t *testing.T) {
	c, conns := rawExecutor(t, func(conn net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if i == 1 {
				return // the second request on a connection: closed unanswered
			}
			reply(conn, healthReply)
		}
	})
	ctx := context.Background()
	for i := range 2 {
		if _, err := c.Health(ctx); err != nil {
			t.Fatalf("health %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (one retried GET)", n)
	}
	if _, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}}); err == nil {
		t.Fatal("an exec whose connection closed unanswered was sent again")
	}
}

// Replies stay bounded on the kept-alive path: headers past their cap, a
// body past the call's cap, and an executor that stops mid-reply end the
// call with an error, and the connection is not reused.
func TestClientBoundsRepliesOnKeptConnections(t *testing.T) {
	c, conns := rawExecutor(t, eachRequest(func(conn net.Conn, req *http.Request) bool {
		switch req.URL.Path {
		case api.PathHealth: // endless headers
			io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
			for i := 0; i < 10000; i++ {
				if _, err := fmt.Fprintf(conn, "X-%d: %s\r\n", i, strings.Repeat("h", 100)); err != nil {
					return false
				}
			}
			return false
		case api.PathInfo: // a body that says more than it sends
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"pids\":")
			time.Sleep(5 * time.Second)
			return false
		}
		reply(conn, `{"exit_code":0,"stdout":"`+strings.Repeat("o", 3<<20)+`"}`)
		return true
	}))
	ctx := context.Background()
	if _, err := c.Health(ctx); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("endless headers: %v", err)
	}
	if _, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}, MaxOutputBytes: 1000}); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("oversized body: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Info(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled body: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("stalled body held the call %v", d)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections for 3 failed calls, want 3 (none reused)", n)
	}
}

// Cancelling the caller's context ends a call blocked on the executor at
// once, with the context's error.
func TestClientCallEndsWithItsContext(t *testing.T) {
	c, _ := rawExecutor(t, func(conn net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			time.Sleep(10 * time.Second)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.Run(ctx, "s", api.RunRequest{Command: "sleep 100", TimeoutS: 100}); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("cancelled call returned after %v", d)
	}
}

// Replies the client did not ask for never answer a later call: an interim
// reply (100 Continue) ends its call with an error and its connection, and
// a kept connection on which the executor sent more than the reply is
// dropped before the next call.
func TestClientIgnoresRepliesNobodyAskedFor(t *testing.T) {
	c, conns := rawExecutor(t, eachRequest(func(conn net.Conn, req *http.Request) bool {
		switch {
		case req.URL.Query().Get("interim") != "":
			io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
			time.Sleep(30 * time.Millisecond) // the final reply comes later
			reply(conn, `{"exit_code":41}`)
		case req.URL.Path == api.PathHealth: // the reply, later one for a later call
			reply(conn, healthReply)
			time.Sleep(30 * time.Millisecond)
			reply(conn, `{"exit_code":42}`)
		default:
			reply(conn, `{"exit_code":0}`)
		}
		return true
	}))
	ctx := context.Background()
	var res api.ExecResult
	if err := c.call(ctx, time.Second, http.MethodPost, api.PathExec+"?interim=1", api.ExecRequest{Argv: []string{"x"}}, &res, 1<<20); err == nil {
		t.Fatalf("an interim reply was taken as the answer: %+v", res)
	}
	time.Sleep(60 * time.Millisecond) // the late final reply reaches the client
	if res, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec after an interim reply: %+v %v", res, err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // the unasked-for reply reaches the client
	if res, err := c.Exec(ctx, api.ExecRequest{Argv: []string{"x"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec after a reply nobody asked for: %+v %v", res, err)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3 (two dropped)", n)
	}
}
