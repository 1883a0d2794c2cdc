package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sbxrun/sbx"
)

// RemoveWhenDone is docker run --rm for a long-lived sandbox: it waits
// until the main command of the sandbox ref (created with
// Options.AutoRemove) has ended for good, or the sandbox stopped, and
// removes the sandbox. It returns nil once the sandbox is gone, also when
// another process removed it first, and ctx's error when ctx ends first.
// A server runs it for every such sandbox (StartBackground); the CLI in a
// background process of its own (sbx auto-remove).
func (h *Host) RemoveWhenDone(ctx context.Context, ref string) error {
	sb, err := h.Get(ctx, ref)
	if errors.Is(err, sbx.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !sb.Options.AutoRemove {
		return fmt.Errorf("%w: sandbox %s was not created to be removed when its command ends (auto_remove)", sbx.ErrState, sb.ShortID())
	}
	for {
		if _, err := h.Wait(ctx, sb.ID); err != nil {
			if errors.Is(err, sbx.ErrNotFound) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("auto-remove sandbox %s: wait for its command: %w", sb.ShortID(), err)
		}
		err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
		switch {
		case err == nil, errors.Is(err, sbx.ErrNotFound):
			return nil
		case errors.Is(err, sbx.ErrBusy):
			// Another process holds it (a remove under way): look again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		default:
			return fmt.Errorf("auto-remove sandbox %s: %w", sb.ShortID(), err)
		}
	}
}

// autoRemoveCandidate reports whether a background watcher should run
// RemoveWhenDone for sb: it asked for it and is past its creation.
func autoRemoveCandidate(sb *sbx.Sandbox) bool {
	if !sb.Options.AutoRemove || sb.Pool != "" {
		return false
	}
	switch sb.Status {
	case sbx.StatusRunning, sbx.StatusPaused, sbx.StatusStopped:
		return true
	}
	return false
}

// autoRemove runs RemoveWhenDone for each sandbox of list that asks for
// it and has no watcher of this host yet, until the host closes.
func (e *events) autoRemove(list []*sbx.Sandbox) {
	for _, sb := range list {
		if !autoRemoveCandidate(sb) {
			continue
		}
		e.removingMu.Lock()
		if e.removing == nil {
			e.removing = map[string]bool{}
		}
		busy := e.removing[sb.ID]
		e.removing[sb.ID] = true
		e.removingMu.Unlock()
		if busy {
			continue
		}
		e.wg.Add(1)
		go func(id string) {
			defer e.wg.Done()
			ctx, cancel := e.stopped()
			defer cancel()
			if err := e.h.RemoveWhenDone(ctx, id); err != nil && ctx.Err() == nil {
				e.h.log.Warn("auto-remove", "id", id, "err", err)
			}
			e.removingMu.Lock()
			delete(e.removing, id)
			e.removingMu.Unlock()
		}(sb.ID)
	}
}
