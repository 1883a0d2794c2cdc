package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Rename gives the sandbox ref the unique name name, as docker rename
// does; "" drops its name. The new name is claimed before the record
// changes and the old one released after, so the sandbox is always
// found by one of them, and a name in use is sbx.ErrNameInUse.
func (h *Host) Rename(ctx context.Context, ref, name string) (*sbx.Sandbox, error) {
	if name != "" {
		if err := state.ValidName(name); err != nil {
			return nil, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
		}
	}
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if sb.Status == sbx.StatusRemoving || sb.Status == sbx.StatusCreating {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	old := sb.Name
	if name == old {
		return sb, nil
	}
	if name != "" {
		if err := h.store.ClaimName(name, sb.ID); err != nil {
			return nil, err
		}
	}
	sb.Name, sb.Options.Name = name, name
	if err := l.Write(sb); err != nil {
		if name != "" {
			h.store.ReleaseName(name, sb.ID)
		}
		return nil, fmt.Errorf("rename sandbox %s: %w", sb.ShortID(), err)
	}
	if old != "" {
		h.store.ReleaseName(old, sb.ID)
	}
	h.events.tracker.renamed(sb)
	return sb, nil
}

// maxChanges bounds what Diff lists: the writable layer is the sandbox's
// to fill, and its listing must not exhaust the host.
const maxChanges = 100_000
