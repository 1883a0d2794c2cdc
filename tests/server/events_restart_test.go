package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

var errDone = errors.New("done")

// TestServerEventsAcrossRestart checks that a client resuming the event
// stream of a server that was restarted gets a reset event (its id is
// unknown to the new server) and then the sandbox.removed of a sandbox
// whose TTL passed while no server ran.
func TestServerEventsAcrossRestart(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The TTL runs from the create's start; it must outlast the create,
	// its ready event and the server's stop on a loaded machine, or the
	// first server removes the sandbox itself.
	req := harness.BusyboxCreate("ttl-restart")
	req.TTL = 6 * time.Second
	ready := make(chan uint64, 1)
	sctx, scancel := context.WithCancel(ctx)
	// From the host's last event: the stream replays what happens before
	// its request reaches the server.
	since := e.Host.LastEventSeq()
	go func() {
		_ = e.C.Events(sctx, since, func(ev api.Event) error {
			if ev.Type == sbx.EventReady && ev.Name == "ttl-restart" {
				ready <- ev.Seq
				return errDone
			}
			return nil
		})
	}()
	sb, err := e.C.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	var lastSeq uint64
	select {
	case lastSeq = <-ready:
	case <-ctx.Done():
		t.Fatal("no sandbox.ready event")
	}
	scancel()
	// The server stops; the TTL passes while none runs.
	e.Srv.Shutdown()
	e.HS.Close()
	e.Srv.Close()
	_ = e.Host.Close()
	if sb.ExpiresAt == nil {
		t.Fatal("the sandbox with a TTL has no expiry time")
	}
	time.Sleep(time.Until(*sb.ExpiresAt) + 500*time.Millisecond)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h2, err := sandbox.Open(sandbox.HostConfig{Root: e.Root, RunRoot: e.RunRoot, Executor: harness.ServerExecutorBin(), Logger: quiet,
		WatchInterval: 100 * time.Millisecond, Policy: &sbx.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Host = h2 // the env's clean-up uses the host that runs now
	s2, err := server.New(server.Config{Backend: h2, Background: h2, Token: harness.ServerTestToken, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs2 := httptest.NewServer(s2.Handler())
	defer func() { s2.Shutdown(); hs2.Close(); s2.Close() }()
	c2, err := client.New(hs2.URL, client.Options{Token: harness.ServerTestToken})
	if err != nil {
		t.Fatal(err)
	}
	var got []api.Event
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	err = c2.Events(rctx, lastSeq, func(ev api.Event) error {
		got = append(got, ev)
		if ev.Type == sbx.EventRemoved {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("resumed stream: %v after %+v", err, got)
	}
	if got[0].Type != sbx.EventReset {
		t.Fatalf("resumed stream with an id of the previous server starts with %+v, want a reset", got[0])
	}
	last := got[len(got)-1]
	if last.Sandbox != sb.ID || last.Name != "ttl-restart" || last.Seq <= lastSeq {
		t.Fatalf("removal of the expired sandbox: %+v (previous server's last id %d)", last, lastSeq)
	}
}
