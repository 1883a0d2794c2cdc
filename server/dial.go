package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
)

// Upgrade tokens of the tunnels: GET /v1/sandboxes/{id}/connect (to the
// executor) and GET /v1/sandboxes/{id}/ports/{port}/connect (to a TCP port
// on the sandbox's loopback).
const (
	UpgradeExecutor = "sbx-executor"
	UpgradePort     = "sbx-port"
)

// connectExecutor serves GET /v1/sandboxes/{id}/connect: after a 101
// Switching Protocols the connection is spliced to the sandbox's executor
// socket, so a remote client can speak the executor's HTTP API itself
// (executor/client with a dialer), as the CLI does locally. The server
// only copies bytes: the caller's client caps what it reads, and the
// tunnel ends at --proxy-timeout.
func (s *Server) connectExecutor(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.tunnel(w, r, UpgradeExecutor, "the executor", func(ctx context.Context) (net.Conn, error) { return s.b.Dial(ctx, id) })
}

// connectPort serves GET /v1/sandboxes/{id}/ports/{port}/connect: after a
// 101 the connection is spliced to TCP port on the sandbox's loopback,
// reached from inside its network namespace (DialPort), as a
// port-forward: the sandbox needs no published port.
func (s *Server) connectPort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		s.fail(w, fmt.Errorf("%w: port %q: want a number from 1 to 65535", sbx.ErrInvalid, r.PathValue("port")))
		return
	}
	s.tunnel(w, r, UpgradePort, "port "+strconv.Itoa(port), func(ctx context.Context) (net.Conn, error) { return s.b.DialPort(ctx, id, port) })
}

// tunnel answers an upgrade with token by splicing the connection to what
// dial reaches (what, for errors).
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request, token, what string, dial func(context.Context) (net.Conn, error)) {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), token) {
		w.Header().Set("Upgrade", token)
		w.Header().Set("Connection", "Upgrade")
		s.fail(w, &StatusError{Status: http.StatusUpgradeRequired, Code: api.CodeBadRequest,
			Message: "send Connection: Upgrade and Upgrade: " + token + " to open a tunnel to " + what})
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	up, err := dial(dctx)
	cancel()
	if err != nil {
		if st, _ := statusOf(err); st == http.StatusInternalServerError {
			err = &StatusError{Status: http.StatusBadGateway, Code: api.CodeBadGateway, Message: err.Error(), Err: err}
		}
		s.fail(w, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		s.fail(w, fmt.Errorf("tunnel: %w", err))
		return
	}
	// The status the metrics see; the hijacked connection is ours now.
	if sw, ok := w.(*statusWriter); ok {
		sw.status = http.StatusSwitchingProtocols
	}
	deadline := time.Now().Add(s.cfg.ProxyTimeout)
	_ = conn.SetDeadline(deadline)
	_ = up.SetDeadline(deadline)
	_, err = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + token + "\r\n\r\n")
	if err == nil {
		err = brw.Flush()
	}
	if err != nil {
		_ = conn.Close()
		_ = up.Close()
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = conn.Close(); _ = up.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // client -> sandbox, starting with what the server buffered
		defer wg.Done()
		_, _ = io.Copy(up, brw.Reader)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			closeBoth()
		}
	}()
	go func() { // sandbox -> client
		defer wg.Done()
		_, _ = io.Copy(conn, up)
		closeBoth()
	}()
	select {
	case <-s.done:
		closeBoth()
	case <-waitGroupDone(&wg):
	}
	closeBoth()
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	return ch
}

// headerHasToken reports whether a comma-separated header has token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
