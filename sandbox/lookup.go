package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// maxSocketPath is the size of sun_path in a unix socket address.
const maxSocketPath = 108

// Resolve turns a full id, a name or a unique id prefix into a full id.
func (h *Host) Resolve(ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty sandbox id or name", sbx.ErrInvalid)
	}
	if state.ValidID(ref) == nil {
		if err := h.exists(ref); err != nil {
			return "", err
		}
		return ref, nil
	}
	if id, err := h.store.LookupName(ref); err == nil {
		if h.exists(id) == nil {
			return id, nil
		}
	}
	if !state.IsIDPrefix(ref) {
		return "", fmt.Errorf("sandbox %q: %w", ref, sbx.ErrNotFound)
	}
	ids, err := h.store.IDs()
	if err != nil {
		return "", err
	}
	i := sort.SearchStrings(ids, ref)
	var match []string
	for ; i < len(ids) && strings.HasPrefix(ids[i], ref); i++ {
		match = append(match, ids[i])
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("sandbox %q: %w", ref, sbx.ErrNotFound)
	case 1:
		return match[0], nil
	}
	return "", fmt.Errorf("%w: %q matches %d sandboxes; give more digits", sbx.ErrAmbiguous, ref, len(match))
}

// minDestructivePrefix is the shortest id prefix that stops, kills or
// removes a sandbox: a one-character prefix matches a sixteenth of the
// sandboxes, and a client guessing ids (or a typo) would remove them.
const minDestructivePrefix = 4

// checkDestructiveRef refuses, for an operation that stops, kills or
// removes, an id prefix shorter than minDestructivePrefix (names and full
// ids are fine). Call it before resolving ref.
func (h *Host) checkDestructiveRef(ref string) error {
	if len(ref) >= minDestructivePrefix || !state.IsIDPrefix(ref) {
		return nil
	}
	if id, err := h.store.LookupName(ref); err == nil && h.exists(id) == nil {
		return nil
	}
	return fmt.Errorf("%w: %q is too short to stop, kill or remove a sandbox by: give at least %d characters of its id, or its name", sbx.ErrAmbiguous, ref, minDestructivePrefix)
}

func (h *Host) exists(id string) error {
	if _, err := os.Stat(h.store.Dir(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, sbx.ErrNotFound)
	}
	return nil
}

// expired reports whether sb's TTL has passed: such a sandbox is being
// removed (by whoever holds its lock) and is no longer listed or found.
func (h *Host) expired(sb *sbx.Sandbox) bool {
	return sb.ExpiresAt != nil && !sb.ExpiresAt.After(h.now())
}

// list is List; withExpired keeps the sandboxes past their TTL that
// another process is still removing, as the watcher needs: it reports a
// removal only once the record is gone.
func (h *Host) list(ctx context.Context, f sbx.Filter, withExpired bool) ([]*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return nil, err
	}
	out := make([]*sbx.Sandbox, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Err == nil:
		case errors.Is(e.Err, state.ErrNoRecord):
			// A create before its first record write (or one that died
			// there): show it as creating.
			e.Record = sbx.Sandbox{ID: e.ID, Status: sbx.StatusCreating}
		case errors.Is(e.Err, state.ErrCorruptRecord):
			h.log.Warn("sandbox record is unreadable", "id", e.ID, "err", e.Err)
			e.Record = *unreadable(e.ID, e.Err)
		default:
			continue // removed while listing
		}
		if !withExpired && h.expired(&e.Record) {
			continue // another process is removing it (it held the lock)
		}
		h.checkAlive(&e.Record)
		if f.Match(&e.Record) {
			out = append(out, &e.Record)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// unreadable is what is known of a sandbox whose record is damaged.
func unreadable(id string, err error) *sbx.Sandbox {
	return &sbx.Sandbox{ID: id, Status: sbx.StatusUnreadable,
		Problem: fmt.Sprintf("%v; the sandbox is left as it is (it may still run); sbx rm -f %s removes it and everything it may have made", err, id[:state.ShortIDLength])}
}

// lock resolves ref and takes the sandbox's lock, reading its record.
func (h *Host) lock(ctx context.Context, ref string) (*state.Lock, *sbx.Sandbox, error) {
	id, err := h.Resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	l, err := h.store.Lock(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var sb sbx.Sandbox
	if err := l.Read(&sb); err != nil {
		if errors.Is(err, state.ErrCorruptRecord) {
			// Held, so that rm -f can remove it deliberately; every other
			// operation refuses its status.
			return l, unreadable(id, err), nil
		}
		l.Unlock()
		if errors.Is(err, state.ErrNoRecord) {
			// Its creator died before the first write; only gc can act.
			return nil, nil, fmt.Errorf("sandbox %s was never fully created: run sbx gc: %w", id, sbx.ErrState)
		}
		return nil, nil, err
	}
	h.healReadPause(l, &sb)
	return l, &sb, nil
}

// hostname is the sandbox's hostname: its option, else the short id.
func hostname(sb *sbx.Sandbox) string {
	if sb.Options.Hostname != "" {
		return sb.Options.Hostname
	}
	return sb.ShortID()
}
