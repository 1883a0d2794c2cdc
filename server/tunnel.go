package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx/server/api"
)

// UpgradeExecutor is the Upgrade token of GET /v1/sandboxes/{id}/connect.
const UpgradeExecutor = "sbx-executor"

// connectExecutor serves GET /v1/sandboxes/{id}/connect: after a 101
// Switching Protocols the connection is spliced to the sandbox's executor
// socket, so a remote client can speak the executor's HTTP API itself
// (executor/client with a dialer), as the CLI does locally. The server
// only copies bytes: the caller's client caps what it reads, and the
// tunnel ends at --proxy-timeout.
func (s *Server) connectExecutor(w http.ResponseWriter, r *http.Request) {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeExecutor) {
		w.Header().Set("Upgrade", UpgradeExecutor)
		w.Header().Set("Connection", "Upgrade")
		s.fail(w, &StatusError{Status: http.StatusUpgradeRequired, Code: api.CodeBadRequest,
			Message: "send Connection: Upgrade and Upgrade: " + UpgradeExecutor + " to open a tunnel to the executor"})
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	up, err := s.b.Dial(dctx, r.PathValue("id"))
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
	_, err = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeExecutor + "\r\n\r\n")
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
	go func() { // client -> executor, starting with what the server buffered
		defer wg.Done()
		_, _ = io.Copy(up, brw.Reader)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			closeBoth()
		}
	}()
	go func() { // executor -> client
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
