package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx/cgroup"
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
	// Orphans are runtime directories, cgroups, names and expiry entries
	// of sandboxes with no record.
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
// creates and removes (with every resource they recorded), and runtime
// directories, mounts, cgroups, names and expiry entries that belong to no
// sandbox. Sandboxes busy with another operation are left alone.
func (m *Manager) GC(ctx context.Context) (*GCReport, error) {
	rep := &GCReport{Expired: m.reapExpired(ctx)}
	_, err := m.recover(ctx, rep)
	errs := []error{err}
	exists := func(id string) bool {
		_, err := os.Stat(m.store.Dir(id))
		return err == nil
	}
	// Runtime directories (with their mounts and containers) of no sandbox.
	runDirs, err := m.store.RunDirs()
	errs = append(errs, err)
	for _, id := range runDirs {
		if state.ValidID(id) != nil || exists(id) {
			continue
		}
		orphan := Sandbox{ID: id}
		if err := m.release(ctx, &Sandbox{ID: id, Resources: m.plan(&orphan)}); err != nil {
			errs = append(errs, fmt.Errorf("remove orphaned runtime directory %s: %w", id, err))
			continue
		}
		rep.Orphans = append(rep.Orphans, "rundir:"+id)
	}
	// libcontainer state of no sandbox (one-shot runs use other ids).
	if entries, err := os.ReadDir(m.containerRoot()); err == nil {
		for _, e := range entries {
			id := e.Name()
			if state.ValidID(id) != nil || exists(id) {
				continue
			}
			if err := m.releaseContainer(ctx, Resource{Kind: ResourceContainer, Path: m.containerRoot(), ID: id}); err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Orphans = append(rep.Orphans, "container:"+id)
		}
	}
	// Cgroups of no sandbox. One-shot runs use other ids and are not ours.
	for id, paths := range cgroup.Leftovers() {
		if state.ValidID(id) != nil || exists(id) {
			continue
		}
		if err := killCgroup(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cgroup.RemovePaths(paths); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Orphans = append(rep.Orphans, "cgroup:"+id)
	}
	// Network leases, veths, namespaces and rules of no sandbox (nor of a
	// one-shot run still going).
	if _, err := os.Stat(filepath.Join(m.store.Root(), "network")); err == nil {
		removed, err := m.gcNetwork(ctx)
		errs = append(errs, err)
		for _, r := range removed {
			rep.Orphans = append(rep.Orphans, "network:"+r)
		}
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

// gcNetwork removes network leftovers. Live owners are this store's
// sandboxes and the one-shot runs whose directory still exists (sbx gc
// removes those of crashed runs first).
func (m *Manager) gcNetwork(ctx context.Context) ([]string, error) {
	n, err := m.network()
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	ids, err := m.store.IDs()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		live[id] = true
	}
	if runs, err := os.ReadDir(filepath.Join(m.store.RunRoot(), runsDir)); err == nil {
		for _, r := range runs {
			live[r.Name()] = true
		}
	}
	return n.GC(ctx, live)
}

// Network returns the bridge network the Manager attaches sandboxes to, for
// keeping its pool of prepared namespaces filled (Prefill) from a server.
func (m *Manager) Network() (*netns.Network, error) { return m.network() }
