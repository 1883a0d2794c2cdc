package sbx

import (
	"context"
	"errors"
	"time"
)

// Renewer renews the owner lease of a sandbox (Options.Lease):
// *sandbox.Host and *client.Client (package server/client).
type Renewer interface {
	Renew(ctx context.Context, ref string) (*Sandbox, error)
}

// KeepLease renews the lease of the sandbox id through r every third of
// lease until ctx ends or the sandbox is gone. A renewal that fails is
// tried again after a short pause (RenewRetryPause, doubling up to a
// third of lease, at most half of what is left of the lease), each try
// allowed half of what is left of the lease (at least a twelfth of it),
// so a hung one leaves time for more, until one succeeds or less than
// RenewRetryPause of the lease is left; then the renewals go on every
// third of lease. The Go client's Create runs it for the sandboxes it
// makes with a lease; a program that creates them through a
// *sandbox.Host runs it itself (go sbx.KeepLease(ctx, host, sb.ID,
// lease)), with a ctx that ends when it no longer needs them.
func KeepLease(ctx context.Context, r Renewer, id string, lease time.Duration) {
	keepLease(ctx, r, id, lease, realClock{})
}

// RenewRetryPause is KeepLease's first pause before it tries a failed
// renewal again.
const RenewRetryPause = 100 * time.Millisecond

// leaseClock is the time KeepLease keeps: the real one, or a test's.
type leaseClock interface {
	now() time.Time
	// sleep waits d; false if ctx ended first.
	sleep(ctx context.Context, d time.Duration) bool
	withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (realClock) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func keepLease(ctx context.Context, r Renewer, id string, lease time.Duration, c leaseClock) {
	every := max(lease/3, MinLease/3)
	expires := c.now().Add(lease) // the lease runs from the create's end
	for c.sleep(ctx, every) {
		for pause := RenewRetryPause; ; pause = min(2*pause, every) {
			start := c.now()
			rctx, cancel := c.withTimeout(ctx, max(expires.Sub(start)/2, lease/12))
			_, err := r.Renew(rctx, id)
			cancel()
			if err == nil {
				expires = start.Add(lease)
				break
			}
			if errors.Is(err, ErrNotFound) || ctx.Err() != nil {
				return
			}
			left := expires.Sub(c.now())
			if left < RenewRetryPause {
				break // run out: the next renewal finds it gone, or renews it
			}
			if !c.sleep(ctx, min(pause, left/2)) {
				return
			}
		}
	}
}
