package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// claimTrace times the steps of one claim for a debug log line ("claim
// steps", with --log-level debug): which steps sit on the claim's
// critical path, and how long those beside it took. Off (every method a
// no-op) unless the host logs at debug level.
type claimTrace struct {
	mu    sync.Mutex
	on    bool
	start time.Time
	last  time.Time
	attrs []any
}

func (h *Host) newClaimTrace(ctx context.Context) *claimTrace {
	t := &claimTrace{on: h.log.Enabled(ctx, slog.LevelDebug)}
	if t.on {
		t.start = time.Now()
		t.last = t.start
	}
	return t
}

// step records the time since the previous step (or the start) as name.
func (t *claimTrace) step(name string) {
	if !t.on {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.attrs = append(t.attrs, slog.Float64(name, ms(now.Sub(t.last))))
	t.last = now
}

// side runs fn, a step beside the critical path, and records its own
// duration as name.
func (t *claimTrace) side(name string, fn func() error) error {
	if !t.on {
		return fn()
	}
	t0 := time.Now()
	err := fn()
	d := time.Since(t0)
	t.mu.Lock()
	t.attrs = append(t.attrs, slog.Float64(name, ms(d)))
	t.mu.Unlock()
	return err
}

// log writes the steps (milliseconds) with the total.
func (t *claimTrace) log(h *Host, ctx context.Context, id string) {
	if !t.on {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h.log.DebugContext(ctx, "claim steps", append([]any{"id", id, "total_ms", ms(time.Since(t.start))}, t.attrs...)...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// since records the time since t0 as name.
func (t *claimTrace) since(name string, t0 time.Time) {
	if !t.on {
		return
	}
	d := time.Since(t0)
	t.mu.Lock()
	t.attrs = append(t.attrs, slog.Float64(name, ms(d)))
	t.mu.Unlock()
}
