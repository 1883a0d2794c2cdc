package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Get returns the record of the sandbox ref (id, prefix or name) without
// locking it.
func (h *Host) Get(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	id, err := h.Resolve(ref)
	if err != nil {
		return nil, err
	}
	var sb sbx.Sandbox
	if err := h.store.Read(id, &sb); err != nil {
		if errors.Is(err, state.ErrNoRecord) {
			return &sbx.Sandbox{ID: id, Status: sbx.StatusCreating}, nil
		}
		if errors.Is(err, state.ErrCorruptRecord) {
			return unreadable(id, err), nil
		}
		return nil, err
	}
	if h.expired(&sb) {
		return nil, fmt.Errorf("sandbox %s: expired: %w", id, sbx.ErrNotFound)
	}
	h.checkAlive(&sb)
	return &sb, nil
}

// List returns the sandboxes f selects, oldest first. It reads the records
// without locks: each is a consistent snapshot. A sandbox past its TTL is
// not listed: it is being removed. The executors of running sandboxes
// whose main command's end is not on record are asked (briefly) whether
// it ended, as Inspect does.
func (h *Host) List(ctx context.Context, f sbx.Filter) ([]*sbx.Sandbox, error) {
	// Whether a running sandbox is exited or restarting (Sandbox.State)
	// is known once its executor was asked: select by state after that.
	wide := f
	wide.Running = false
	switch f.Status {
	case sbx.StatusRunning, sbx.StatusExited, sbx.StatusRestarting:
		wide.Status = ""
	}
	list, err := h.list(ctx, wide, false)
	if err != nil {
		return nil, err
	}
	h.probeCmdEnds(ctx, list)
	return slices.DeleteFunc(list, func(sb *sbx.Sandbox) bool { return !f.Match(sb) }), nil
}

// Inspect returns the record of the sandbox ref with its current
// processes, and the end of its main command once it ended (asking the
// executor when that is not on record yet).
func (h *Host) Inspect(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	h.probeCmdEnd(ctx, sb)
	if sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused {
		sb.Pids, _ = cgroup.Pids(sb.ID)
	}
	return sb, nil
}

// running returns the record of a sandbox whose executor can answer.
func (h *Host) running(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	switch sb.Status {
	case sbx.StatusRunning:
		return sb, nil
	case sbx.StatusPaused:
		return nil, fmt.Errorf("%w: sandbox %s is paused: resume it first", sbx.ErrState, sb.ShortID())
	case sbx.StatusStopped:
		return nil, stoppedError(sb)
	}
	return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
}
