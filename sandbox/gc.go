package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox/state"
)

// GCReport says what GC removed.
type GCReport struct {
	// Expired sandboxes removed because their TTL passed.
	Expired []string `json:"expired,omitempty"`
	// Interrupted sandboxes whose create or remove died midway, undone.
	Interrupted []string `json:"interrupted,omitempty"`
	// Stopped sandboxes found dead and marked stopped.
	Stopped []string `json:"stopped,omitempty"`
	// Orphans are runtime directories and names of sandboxes of this
	// root that have no record.
	Orphans []string `json:"orphans,omitempty"`
}

// reapExpired removes the sandboxes whose TTL has passed. Every Manager
// operation calls it first; it reads one small directory when nothing has
// expired. Sandboxes busy with another operation are left for next time.
func (m *Manager) reapExpired(ctx context.Context) []string {
	ids, err := m.store.Expired(m.now())
	if err != nil {
		m.log.Warn("read sandbox expiry index", "err", err)
		return nil
	}
	var reaped []string
	for _, id := range ids {
		l, err := m.store.TryLock(id)
		if errors.Is(err, state.ErrNotFound) {
			m.store.ClearExpiry(id)
			continue
		}
		if err != nil {
			continue // busy: a create in progress or another remover
		}
		var sb Sandbox
		if err := l.Read(&sb); err != nil || sb.ExpiresAt == nil || sb.ExpiresAt.After(m.now()) {
			l.Unlock()
			continue
		}
		m.emit(EventExpired, &sb)
		if err := m.destroy(context.WithoutCancel(ctx), l, &sb); err != nil {
			m.log.Warn("remove expired sandbox", "id", id, "err", err)
			l.Unlock()
			continue
		}
		m.log.Info("removed expired sandbox", "id", id)
		reaped = append(reaped, id)
	}
	return reaped
}

// Recover brings the records in line with reality after sbx or the host
// died: creates and removes that were interrupted are undone (all their
// recorded resources released), and running sandboxes whose PID 1 is gone
// are marked stopped. It returns the sandboxes that still run, which need
// nothing more to be re-adopted: their executor sockets and libcontainer
// state are on disk. A server calls it at start.
func (m *Manager) Recover(ctx context.Context) ([]*Sandbox, error) {
	var rep GCReport
	live, err := m.recover(ctx, &rep)
	return live, err
}

func (m *Manager) recover(ctx context.Context, rep *GCReport) ([]*Sandbox, error) {
	entries, err := state.ReadAll[Sandbox](m.store)
	if err != nil {
		return nil, err
	}
	defer m.sweepNetwork(ctx, rep)
	var live []*Sandbox
	var errs []error
	for _, e := range entries {
		if errors.Is(e.Err, state.ErrNotFound) {
			continue
		}
		sb := e.Record
		if e.Err == nil && sb.Status != StatusCreating && sb.Status != StatusRemoving &&
			sb.Status != StatusRunning && sb.Status != StatusPaused {
			continue // stopped: nothing to check
		}
		l, err := m.store.TryLock(e.ID)
		if err != nil {
			if e.Err == nil && (sb.Status == StatusRunning || sb.Status == StatusPaused) {
				live = append(live, &sb)
			}
			continue // busy with a live operation
		}
		if err := l.Read(&sb); err != nil {
			if errors.Is(err, state.ErrCorruptRecord) {
				// Never act on a sandbox that cannot be read: it may run.
				m.log.Warn("sandbox record is unreadable; left as it is (sbx rm -f removes it)", "id", e.ID, "err", err)
			}
			if !errors.Is(err, state.ErrNoRecord) {
				l.Unlock()
				continue
			}
			// The creator died before its first write: nothing but the
			// directory and the lock can exist, yet release the plan to
			// be sure.
			sb = Sandbox{ID: e.ID, Status: StatusCreating}
			sb.Resources = m.plan(&sb)
		}
		switch sb.Status {
		case StatusCreating, StatusRemoving:
			if err := m.destroy(ctx, l, &sb); err != nil {
				errs = append(errs, fmt.Errorf("undo interrupted sandbox %s: %w", sb.ShortID(), err))
			} else {
				rep.Interrupted = append(rep.Interrupted, e.ID)
			}
		default:
			m.refresh(l, &sb)
			if sb.Status == StatusStopped {
				rep.Stopped = append(rep.Stopped, e.ID)
			} else {
				live = append(live, &sb)
			}
		}
		l.Unlock()
	}
	return live, errors.Join(errs...)
}

// GC removes whatever crashes left behind: expired sandboxes, interrupted
// creates and removes (with every resource they recorded: mounts,
// container, cgroups, network), and runtime directories and names of this
// root that belong to no sandbox. Sandboxes busy with another operation
// are left alone, and so is everything of other roots and of one-shot runs.
func (m *Manager) GC(ctx context.Context) (*GCReport, error) {
	rep := &GCReport{Expired: m.reapExpired(ctx)}
	_, err := m.recover(ctx, rep)
	errs := []error{err}
	// Directories of creates and removes whose process died midway; those
	// of live processes are theirs.
	abandoned, err := m.store.RemoveAbandoned()
	errs = append(errs, err)
	rep.Interrupted = append(rep.Interrupted, abandoned...)
	exists := func(id string) bool {
		_, err := os.Stat(m.store.Dir(id))
		return err == nil
	}
	// Runtime directories of no sandbox of this root (someone removed the
	// root's records by hand). Everything else a sandbox creates is found
	// through its record, which exists before the resource and goes after
	// it; host-wide sweeps (cgroups, veths, libcontainer state) would hit
	// the sandboxes of other roots and of one-shot runs, so there are none.
	runDirs, err := m.store.RunDirs()
	errs = append(errs, err)
	for _, id := range runDirs {
		if state.ValidID(id) != nil || exists(id) || !m.ownsRunDir(id) {
			continue
		}
		orphan := Sandbox{ID: id}
		if err := m.release(ctx, &Sandbox{ID: id, Resources: m.plan(&orphan)}); err != nil {
			errs = append(errs, fmt.Errorf("remove orphaned runtime directory %s: %w", id, err))
			continue
		}
		rep.Orphans = append(rep.Orphans, "rundir:"+id)
	}
	// Names and expiry entries of no sandbox.
	names, err := m.store.Names()
	errs = append(errs, err)
	for name, owner := range names {
		if state.ValidID(owner) != nil || !exists(owner) {
			m.store.ReleaseName(name, owner)
			rep.Orphans = append(rep.Orphans, "name:"+name)
		}
	}
	return rep, errors.Join(errs...)
}

// sweepNetwork removes the bridged networks of prepares and attaches that
// died midway (netns.SweepInterrupted), when this root has a network.
func (m *Manager) sweepNetwork(ctx context.Context, rep *GCReport) {
	if _, err := os.Stat(filepath.Join(m.store.Root(), "network", "leases")); err != nil {
		return
	}
	n, err := m.network()
	if err != nil {
		m.log.Warn("open the network to sweep interrupted operations", "err", err)
		return
	}
	removed, err := n.SweepInterrupted(ctx)
	if err != nil {
		m.log.Warn("sweep the network of interrupted operations", "err", err)
	}
	rep.Interrupted = append(rep.Interrupted, removed...)
}

// ownerFile in a runtime directory names the root whose sandbox it is, so
// that stores sharing a run root never collect each other's directories.
const rootOwnerFile = "root"

// ownsRunDir reports whether the runtime directory of id belongs to this
// Manager's root.
func (m *Manager) ownsRunDir(id string) bool {
	data, err := os.ReadFile(filepath.Join(m.store.RunDir(id), rootOwnerFile))
	return err == nil && string(data) == m.store.Root()
}

// Network returns the bridge network the Manager attaches sandboxes to;
// `sbx serve --network-pool N` keeps its pool of prepared namespaces filled
// through it (Prefill, Pooled, DrainPool).
func (m *Manager) Network() (*netns.Network, error) { return m.network() }
