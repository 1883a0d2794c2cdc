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

// cpuBackend lists two running sandboxes whose CPU time grows by half a
// second per reading; "gone" answers its first reading only.
type cpuBackend struct {
	sbx.Sandboxes
	cpu map[string]float64
}

func (c *cpuBackend) List(context.Context, sbx.Filter) ([]*sbx.Sandbox, error) {
	return []*sbx.Sandbox{{ID: "a1", Name: "web"}, {ID: "gone"}}, nil
}

func (c *cpuBackend) Get(_ context.Context, ref string) (*sbx.Sandbox, error) {
	if ref != "web" {
		return nil, sbx.ErrNotFound
	}
	return &sbx.Sandbox{ID: "a1", Name: "web"}, nil
}

func (c *cpuBackend) Stats(_ context.Context, id string) (*sbx.Usage, error) {
	if id == "gone" && c.cpu[id] > 0 {
		return nil, sbx.ErrNotFound
	}
	c.cpu[id] += 0.5
	return &sbx.Usage{CPUTimeS: c.cpu[id]}, nil
}

// WatchStatsOf: every running sandbox without refs, CPU % from two
// readings, a sandbox that went away drops out, a named one that does not
// exist fails.
func TestWatchStatsOf(t *testing.T) {
	b := &cpuBackend{cpu: map[string]float64{}}
	var got [][]sbx.StatsRow
	err := sbx.WatchStatsOf(context.Background(), b, nil, 100*time.Millisecond, true, func(rows []sbx.StatsRow) error {
		got = append(got, rows)
		return nil
	})
	if err != nil || len(got) != 1 || len(got[0]) != 1 || got[0][0].Name != "web" {
		t.Fatalf("one reading of all: %v %+v", err, got)
	}
	// 0.5 s of CPU in about 0.1 s of wall time: about 500 %.
	if p := got[0][0].CPUPercent; p < 200 || p > 510 {
		t.Fatalf("CPU %% = %v, want about 500", p)
	}
	if err := sbx.WatchStatsOf(context.Background(), b, []string{"nosuch"}, time.Millisecond, true, func([]sbx.StatsRow) error { return nil }); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("a named sandbox that does not exist: %v", err)
	}
}
