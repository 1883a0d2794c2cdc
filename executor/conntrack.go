package executor

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connTracker knows the HTTP server's open connections, so that a
// checkpoint can wait until none but the caller's is left: CRIU cannot dump
// one end of a connection to the host.
type connTracker struct {
	mu      sync.Mutex
	conns   map[net.Conn]http.ConnState
	changed chan struct{} // closed and replaced on every change
}

func newConnTracker() *connTracker {
	return &connTracker{conns: map[net.Conn]http.ConnState{}, changed: make(chan struct{})}
}

// connKey is the context key under which a request finds its connection.
type connKey struct{}

// context is the http.Server's ConnContext: it records c in the contexts
// of the requests read from it.
func (t *connTracker) context(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// hook is the http.Server's ConnState. Hijacked connections (sessions,
// attach, streams) are no longer the server's, so they are forgotten.
func (t *connTracker) hook(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(t.conns, c)
	} else {
		t.conns[c] = st
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// drain closes every connection but self (the request's own, from its
// context) that is not serving a request, and waits until no connection
// but self is left or the timeout passes. It reports how many are left.
// The server's keep-alives must be off, so that a connection whose
// request is in progress closes once it is answered.
func (t *connTracker) drain(self context.Context, timeout time.Duration) int {
	own, _ := self.Value(connKey{}).(net.Conn)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		left := 0
		var idle []net.Conn
		for c, st := range t.conns {
			if c == own {
				continue
			}
			left++
			if st == http.StateNew || st == http.StateIdle {
				idle = append(idle, c)
			}
		}
		changed := t.changed
		t.mu.Unlock()
		if left == 0 {
			return 0
		}
		// Closing wakes the connection's goroutine, which reports
		// StateClosed once its socket is closed.
		for _, c := range idle {
			_ = c.Close()
		}
		select {
		case <-changed:
		case <-deadline.C:
			return left
		}
	}
}
