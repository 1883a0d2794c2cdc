package sbx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// countingStats is a backend whose Stats counts its calls and cancels
// the watch after the third.
type countingStats struct {
	sbx.Sandboxes
	calls  int
	cancel context.CancelFunc
	err    error
}

func (c *countingStats) Stats(ctx context.Context, ref string) (*sbx.Usage, error) {
	c.calls++
	if c.calls == 3 {
		c.cancel()
		return nil, ctx.Err()
	}
	return &sbx.Usage{Pids: uint64(c.calls)}, c.err
}

func TestWatchStats(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &countingStats{cancel: cancel}
	var firsts []bool
	err := sbx.WatchStats(ctx, c, "x", time.Millisecond, false, func(u *sbx.Usage, first bool) error {
		firsts = append(firsts, first)
		return nil
	})
	if err != nil || len(firsts) != 2 || !firsts[0] || firsts[1] {
		t.Errorf("watch until cancelled: %v, firsts %v", err, firsts)
	}
	once := &countingStats{cancel: func() {}}
	if err := sbx.WatchStats(context.Background(), once, "x", time.Hour, true, func(*sbx.Usage, bool) error { return nil }); err != nil || once.calls != 1 {
		t.Errorf("once: %v, %d calls", err, once.calls)
	}
	boom := errors.New("boom")
	failing := &countingStats{cancel: func() {}, err: boom}
	if err := sbx.WatchStats(context.Background(), failing, "x", time.Hour, false, func(*sbx.Usage, bool) error { return nil }); !errors.Is(err, boom) {
		t.Errorf("a failing first reading: %v", err)
	}
}
