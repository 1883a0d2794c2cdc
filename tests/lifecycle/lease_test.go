package lifecycle

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestCreateLeaseRemovesWhatItsOwnerLeft: a sandbox created with an owner
// lease lives as long as its creator renews it: the Go client and a
// library Host renew it in the background and it outlives several leases;
// once they stop (Close, as when the process dies) it is removed, as is
// one created over REST that nobody renews. POST /renew renews; a sandbox
// without a lease cannot be renewed; a run refuses a lease.
func TestCreateLeaseRemovesWhatItsOwnerLeft(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const lease = 2 * time.Second
	waitRemoved := func(id, what string) {
		t.Helper()
		for range 150 {
			if _, err := e.C.Get(ctx, id); errors.Is(err, sbx.ErrNotFound) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: sandbox %s still there 15s after its lease ran out", what, id)
	}
	alive := func(id, what string) {
		t.Helper()
		sb, err := e.C.Get(ctx, id)
		if err != nil || sb.Status != sbx.StatusRunning || sb.ExpiresAt == nil || !sb.ExpiresAt.After(time.Now()) {
			t.Fatalf("%s: %+v %v, want it running with a deadline ahead", what, sb, err)
		}
	}
	o := harness.BusyboxCreate("")
	o.Lease = lease

	// The Go client renews until it closes.
	owner, err := client.New(e.URL, client.Options{Token: harness.ServerTestToken})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := owner.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	time.Sleep(3 * lease)
	alive(sb.ID, "renewed by the Go client")
	owner.Close()
	waitRemoved(sb.ID, "the Go client closed")

	// A program using a library Host on the same root renews with
	// KeepLease until it stops (its context ends, or it dies).
	lib, err := sandbox.Open(sandbox.HostConfig{Root: e.Root, RunRoot: e.RunRoot, Executor: harness.ServerExecutorBin()})
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	lsb, err := lib.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(lsb.ID)
	kctx, stopRenewing := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() { defer close(kept); sbx.KeepLease(kctx, lib, lsb.ID, lease) }()
	time.Sleep(3 * lease)
	alive(lsb.ID, "renewed by the library")
	stopRenewing()
	<-kept
	waitRemoved(lsb.ID, "the library's owner stopped renewing")

	// Over REST nobody renews unless asked: /renew pushes the deadline.
	var rsb sbx.Sandbox
	if err := e.C.Call(ctx, http.MethodPost, "/v1/sandboxes", o, &rsb); err != nil {
		t.Fatal(err)
	}
	e.See(rsb.ID)
	first := *rsb.ExpiresAt
	time.Sleep(lease / 2)
	var renewed sbx.Sandbox
	if err := e.C.Call(ctx, http.MethodPost, client.SandboxPath(rsb.ID, "/renew"), nil, &renewed); err != nil || renewed.ExpiresAt == nil || !renewed.ExpiresAt.After(first) {
		t.Fatalf("renew over REST: %+v %v, want a later deadline than %v", renewed.ExpiresAt, err, first)
	}
	waitRemoved(rsb.ID, "nobody renewed it over REST")

	// No lease, nothing to renew; a lease too short, or on a run, is refused.
	plain, err := e.C.Create(ctx, harness.BusyboxCreate(""))
	if err != nil {
		t.Fatal(err)
	}
	e.See(plain.ID)
	if _, err := e.C.Renew(ctx, plain.ID); !errors.Is(err, sbx.ErrState) {
		t.Fatalf("renew without a lease: %v, want ErrState", err)
	}
	if err := e.C.Remove(ctx, plain.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	short := harness.BusyboxCreate("")
	short.Lease = time.Millisecond
	if _, err := e.C.Create(ctx, short); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a 1ms lease: %v, want ErrInvalid", err)
	}
	ro := o
	ro.Cmd = []string{"true"}
	if _, err := e.Host.Run(ctx, sbx.RunOptions{Options: ro}); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a run with a lease: %v, want ErrInvalid", err)
	}
}
