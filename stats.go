package sbx

import (
	"context"
	"time"
)

// WatchStats calls fn with a sandbox's usage now and, unless once, again
// every interval until ctx ends, as docker stats does; first is set for
// the first reading. It returns nil when ctx ends after a first reading,
// else the first error of Stats or fn.
func WatchStats(ctx context.Context, s Sandboxes, ref string, interval time.Duration, once bool, fn func(u *Usage, first bool) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for first := true; ; first = false {
		u, err := s.Stats(ctx, ref)
		if err != nil {
			if !first && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := fn(u, first); err != nil {
			return err
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
