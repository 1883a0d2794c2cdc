package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// GC removes whatever crashes left behind: one-shot runs whose sbx
// process died, expired sandboxes, interrupted creates and removes (with
// every resource they recorded: mounts, container, cgroups, network), and
// runtime directories and names of this root that belong to no sandbox.
// Sandboxes busy with another operation are left alone, and so is
// everything of other roots. The parent cgroup stays, empty or not, like
// the bridge: removing it raced creates in other processes, which make it
// (EnsureParent) and then their sandbox's cgroup below it.
func (h *Host) GC(ctx context.Context) (*sbx.GCReport, error) {
	runs, err := h.gcRuns(ctx)
	rep := &sbx.GCReport{Runs: runs, Expired: h.removeExpired(ctx)}
	errs := []error{err}
	_, err = h.recover(ctx, rep)
	errs = append(errs, err)
	errs = append(errs, h.gcPools(ctx, rep))
	if store, err := h.imageStore(); err == nil {
		for _, d := range store.RemoveDebris(ctx) {
			rep.Orphans = append(rep.Orphans, "image-debris:"+d)
		}
	}
	for _, d := range h.sweepBuildTemp() {
		rep.Orphans = append(rep.Orphans, "build-tmp:"+d)
	}
	for _, d := range h.sweepVolumeDebris(ctx) {
		rep.Orphans = append(rep.Orphans, "volume-debris:"+d)
	}
	errs = append(errs, h.gcAutoRemove(ctx, rep))
	h.resumeEgress(ctx)
	rep.PartialSnapshots, err = h.removePartialSnapshots()
	errs = append(errs, err)
	exists := func(id string) bool {
		_, err := os.Stat(h.store.Dir(id))
		return err == nil
	}
	// Runtime directories of no sandbox of this root (someone removed the
	// root's records by hand). Everything else a sandbox creates is found
	// through its record, which exists before the resource and goes after
	// it; host-wide sweeps (cgroups, veths, container state) would hit the
	// sandboxes of other roots, so there are none.
	runDirs, err := h.store.RunDirs()
	errs = append(errs, err)
	for _, id := range runDirs {
		if state.ValidID(id) != nil || exists(id) || !h.ownsRunDir(id) {
			continue
		}
		orphan := sbx.Sandbox{ID: id}
		if err := h.release(ctx, h.plan(&orphan)); err != nil {
			errs = append(errs, fmt.Errorf("remove orphaned runtime directory %s: %w", id, err))
			continue
		}
		rep.Orphans = append(rep.Orphans, "rundir:"+id)
	}
	// Mount namespaces of no sandbox (its record and runtime directory
	// were removed by hand): a record exists before its sandbox's
	// namespace is pinned and goes after it is unpinned, so none of these
	// is being made.
	pins, err := h.mountNS.Names()
	errs = append(errs, err)
	for _, id := range pins {
		if state.ValidID(id) != nil || exists(id) {
			continue
		}
		if _, err := os.Stat(h.store.RunDir(id)); err == nil {
			continue // the runtime directory's release above unpins it
		}
		if err := h.mountNS.Remove(id); err != nil {
			errs = append(errs, fmt.Errorf("remove orphaned mount namespace %s: %w", id, err))
			continue
		}
		rep.Orphans = append(rep.Orphans, "mntns:"+id)
	}
	// Names and expiry entries of no sandbox.
	names, err := h.store.Names()
	errs = append(errs, err)
	for name, owner := range names {
		if state.ValidID(owner) != nil || !exists(owner) {
			h.store.ReleaseName(name, owner)
			rep.Orphans = append(rep.Orphans, "name:"+name)
		}
	}
	return rep, errors.Join(errs...)
}

// sweepNetwork removes the bridged networks of prepares and attaches that
// died midway (netns.SweepInterrupted), when this root has a network.
func (h *Host) sweepNetwork(ctx context.Context, rep *sbx.GCReport) {
	if !h.networkExists() {
		return
	}
	n, err := h.network()
	if err != nil {
		h.log.Warn("open the network to sweep interrupted operations", "err", err)
		return
	}
	removed, err := n.SweepInterrupted(ctx)
	if err != nil {
		h.log.Warn("sweep the network of interrupted operations", "err", err)
	}
	rep.Interrupted = append(rep.Interrupted, removed...)
}

// rootOwnerFile in a runtime directory names the root whose sandbox it
// is, so that stores sharing a run root never collect each other's
// directories.
const rootOwnerFile = "root"

// ownsRunDir reports whether the runtime directory of id belongs to this
// host's root.
func (h *Host) ownsRunDir(id string) bool {
	data, err := os.ReadFile(filepath.Join(h.store.RunDir(id), rootOwnerFile))
	return err == nil && string(data) == h.store.Root()
}

// gcAutoRemove removes the sandboxes created with AutoRemove whose
// command has ended (or that stopped) but that are still here: the
// process that was to remove them died.
func (h *Host) gcAutoRemove(ctx context.Context, rep *sbx.GCReport) error {
	list, err := h.List(ctx, sbx.Filter{})
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range list {
		if !autoRemoveCandidate(sb) {
			continue
		}
		err := h.removeIfDone(ctx, sb.ID, autoRemoveProbe)
		switch {
		case errors.Is(err, errNotDone):
			continue // still running (or not answering): its remover may be alive
		case errors.Is(err, sbx.ErrNotFound):
		case err != nil:
			errs = append(errs, fmt.Errorf("auto-remove sandbox %s: %w", sb.ShortID(), err))
			continue
		}
		rep.AutoRemoved = append(rep.AutoRemoved, sb.ID)
	}
	return errors.Join(errs...)
}
