package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Recover brings the records in line with reality after sbx or the host
// died: creates and removes that were interrupted are undone (all their
// recorded resources released), and running sandboxes whose PID 1 is gone
// are marked stopped, and the hidden directories of creates and removes
// whose process died (before their first record write, or after their
// resources were released) are deleted. It returns the sandboxes that
// still run, which need nothing more to be re-adopted: their executor
// sockets and container state are on disk. StartBackground calls it.
func (h *Host) Recover(ctx context.Context) ([]*sbx.Sandbox, error) {
	var rep sbx.GCReport
	return h.recover(ctx, &rep)
}

func (h *Host) recover(ctx context.Context, rep *sbx.GCReport) ([]*sbx.Sandbox, error) {
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return nil, err
	}
	defer h.sweepNetwork(ctx, rep)
	var live []*sbx.Sandbox
	var errs []error
	for _, e := range entries {
		if errors.Is(e.Err, state.ErrNotFound) {
			continue
		}
		sb := e.Record
		if e.Err == nil && sb.Status != sbx.StatusCreating && sb.Status != sbx.StatusRemoving &&
			sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
			continue // stopped: nothing to check
		}
		l, err := h.store.TryLock(e.ID)
		if err != nil {
			if e.Err == nil && (sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused) {
				live = append(live, &sb)
			}
			continue // busy with a live operation
		}
		if err := l.Read(&sb); err != nil {
			if errors.Is(err, state.ErrCorruptRecord) {
				// Never act on a sandbox that cannot be read: it may run.
				h.log.Warn("sandbox record is unreadable; left as it is (sbx rm -f removes it)", "id", e.ID, "err", err)
			}
			if !errors.Is(err, state.ErrNoRecord) {
				l.Unlock()
				continue
			}
			// The creator died before its first write: nothing but the
			// directory and the lock can exist, yet release the plan to
			// be sure.
			sb = sbx.Sandbox{ID: e.ID, Status: sbx.StatusCreating}
			sb.Resources = h.plan(&sb)
		}
		switch sb.Status {
		case sbx.StatusCreating, sbx.StatusRemoving:
			if err := h.destroy(ctx, l, &sb); err != nil {
				errs = append(errs, fmt.Errorf("undo interrupted sandbox %s: %w", sb.ShortID(), err))
				break
			}
			rep.Interrupted = append(rep.Interrupted, e.ID)
			if sb.Status == sbx.StatusCreating {
				for _, name := range h.dropVolumesOfKilledCreate(ctx, &sb) {
					rep.Orphans = append(rep.Orphans, "volume:"+name)
				}
			}
		default:
			h.healReadPause(l, &sb)
			h.refresh(l, &sb)
			if err := h.thawFrozenRunning(&sb); err != nil {
				errs = append(errs, err)
			}
			if sb.Status == sbx.StatusStopped {
				rep.Stopped = append(rep.Stopped, e.ID)
			} else {
				live = append(live, &sb)
			}
		}
		l.Unlock()
	}
	// Directories of creates and removes whose process died midway; those
	// of live processes are theirs.
	abandoned, err := h.store.RemoveAbandoned()
	errs = append(errs, err)
	rep.Interrupted = append(rep.Interrupted, abandoned...)
	return live, errors.Join(errs...)
}
