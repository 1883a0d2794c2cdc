package sbx

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is a leaseClock that moves only when told: KeepLease's sleeps
// and the renewals of a fakeRenewer move it.
type fakeClock struct {
	t       time.Time
	timeout time.Duration // of the renewal in progress
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) bool {
	c.t = c.t.Add(d)
	return ctx.Err() == nil
}

func (c *fakeClock) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c.timeout = d
	return context.WithCancel(ctx)
}

// fakeRenewer answers renewals as script says, one outcome a call:
// "hang" (until the renewal's timeout), "fail" (at once), "ok"; after the
// script, the sandbox is gone. It notes when each renewal was sent.
type fakeRenewer struct {
	c      *fakeClock
	script []string
	sent   []time.Duration // since the start
	oks    []time.Duration
	start  time.Time
}

func (r *fakeRenewer) Renew(ctx context.Context, ref string) (*Sandbox, error) {
	r.sent = append(r.sent, r.c.t.Sub(r.start))
	if len(r.sent) > len(r.script) {
		return nil, ErrNotFound
	}
	switch r.script[len(r.sent)-1] {
	case "hang":
		r.c.t = r.c.t.Add(r.c.timeout)
		return nil, context.DeadlineExceeded
	case "fail":
		return nil, errors.New("503 Service Unavailable")
	}
	r.oks = append(r.oks, r.c.t.Sub(r.start))
	return &Sandbox{ID: ref}, nil
}

// TestKeepLeaseRetriesWithinTheLease: renewals that fail or hang are tried
// again within what is left of the lease, so two in a row do not lose it
// (a 3 s lease: renewals every second).
func TestKeepLeaseRetriesWithinTheLease(t *testing.T) {
	const lease = 3 * time.Second
	for name, script := range map[string][]string{
		"two hung":   {"hang", "hang", "ok", "ok"},
		"three fail": {"fail", "fail", "fail", "ok", "ok"},
		"hung, fail": {"hang", "fail", "hang", "ok", "ok"},
		"all fine":   {"ok", "ok", "ok"},
	} {
		t.Run(name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1e9, 0)}
			r := &fakeRenewer{c: c, script: script, start: c.t}
			keepLease(context.Background(), r, "sb", lease, c)
			if len(r.sent) != len(script)+1 {
				t.Fatalf("renewals sent at %v; want %d (the script's, then one that finds the sandbox gone)", r.sent, len(script)+1)
			}
			// Each renewal that succeeded came within a lease of the one
			// before it (or of the start).
			last := time.Duration(0)
			for _, ok := range r.oks {
				if ok-last >= lease {
					t.Fatalf("renewed at %v, %v after the last renewal (%v): the %v lease had run out (sent at %v)", ok, ok-last, last, lease, r.sent)
				}
				last = ok
			}
			if len(r.oks) != 2 && len(r.oks) != 3 {
				t.Fatalf("renewals that succeeded: %v", r.oks)
			}
		})
	}
}

// TestKeepLeaseStopsWithItsContext: a renewal that fails once the caller
// ended the context is not tried again.
func TestKeepLeaseStopsWithItsContext(t *testing.T) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelingRenewer{cancel: cancel}
	keepLease(ctx, r, "sb", 3*time.Second, c)
	if r.calls != 1 {
		t.Fatalf("%d renewals after the context ended, want 1", r.calls)
	}
}

type cancelingRenewer struct {
	cancel func()
	calls  int
}

func (r *cancelingRenewer) Renew(ctx context.Context, ref string) (*Sandbox, error) {
	r.calls++
	r.cancel()
	return nil, context.Canceled
}
