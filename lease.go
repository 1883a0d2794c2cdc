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
// lease until ctx ends or the sandbox is gone; a renewal that fails is
// tried again at the next tick. The Go client's Create runs it for the
// sandboxes it makes with a lease; a program that creates them through a
// *sandbox.Host runs it itself (go sbx.KeepLease(ctx, host, sb.ID,
// lease)), with a ctx that ends when it no longer needs them.
func KeepLease(ctx context.Context, r Renewer, id string, lease time.Duration) {
	every := max(lease/3, MinLease/3)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		_, err := r.Renew(rctx, id)
		cancel()
		if errors.Is(err, ErrNotFound) {
			return
		}
	}
}
