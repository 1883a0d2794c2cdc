package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Restore starts a new sandbox from a snapshot: a new id, its own writable
// layer (the snapshot's), network (a bridged one gets a new lease; TCP
// connections to the outside were closed) and cgroups, with the
// snapshot's processes.
func (h *Host) Restore(ctx context.Context, name string, o sbx.RestoreOptions) (*sbx.Sandbox, error) {
	if _, err := h.criu(); err != nil {
		return nil, err
	}
	snap, ri, err := h.loadSnapshot(name)
	if err != nil {
		return nil, err
	}
	opts := snap.Options
	opts.Name = o.Name
	if o.Labels != nil {
		opts.Labels = o.Labels
	}
	return h.restoreNew(ctx, snap, ri, opts)
}

// Fork starts o.Count copies of a running sandbox from a checkpoint made
// with it left running; the source runs on. Each copy has its own id,
// writable layer, network and cgroups; published ports are not copied
// (the source holds them).
func (h *Host) Fork(ctx context.Context, ref string, o sbx.ForkOptions) ([]*sbx.Sandbox, error) {
	n := o.Count
	if n == 0 {
		n = 1
	}
	if n < 0 || n > 64 {
		return nil, fmt.Errorf("%w: fork count %d: give 1 to 64", sbx.ErrInvalid, n)
	}
	snap, err := h.Checkpoint(ctx, ref, sbx.CheckpointOptions{LeaveRunning: true})
	if err != nil {
		return nil, err
	}
	if !o.Keep {
		defer func() { _ = h.RemoveSnapshot(context.WithoutCancel(ctx), snap.Name) }()
	}
	_, ri, err := h.loadSnapshot(snap.Name)
	if err != nil {
		return nil, err
	}
	// One after another: side by side they only contend for the disk and
	// the CPU (measured slower on two cores, BENCHMARKS.md).
	var out []*sbx.Sandbox
	for i := 0; i < n; i++ {
		opts := snap.Options
		opts.Publish = nil
		sb, err := h.restoreNew(ctx, snap, ri, opts)
		if err != nil {
			errs := []error{fmt.Errorf("fork copy %d of %d: %w", i+1, n, err)}
			for _, made := range out {
				errs = append(errs, h.Remove(context.WithoutCancel(ctx), made.ID, sbx.RemoveOptions{Force: true}))
			}
			return nil, errors.Join(errs...)
		}
		out = append(out, sb)
	}
	return out, nil
}

// digestRef is ref (a familiar name, tag and all) pinned to digest.
func digestRef(ref, digest string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref + "@" + digest
}

// restoreNew creates a sandbox with opts from the snapshot, as a create
// does (recorded first, everything released on error), with the
// snapshot's writable layer and processes in place of a fresh start.
func (h *Host) restoreNew(ctx context.Context, snap *sbx.Snapshot, ri *restoreInfo, opts sbx.Options) (*sbx.Sandbox, error) {
	t0 := time.Now()
	// The restored processes keep their hostname (their UTS namespace is
	// part of the checkpoint): the record says so.
	opts.Hostname = snap.Hostname
	if snap.Image != nil {
		opts.Image = digestRef(snap.Image.Ref, snap.Image.Digest)
	}
	// Only sandboxes in the host's user namespace are checkpointed; a
	// snapshot recorded before private became the default names none.
	if opts.UserNS == "" {
		opts.UserNS = sbx.UserNSHost
	}
	if err := h.checkOptions(&opts, true, h.cfg.Policy); err != nil {
		return nil, err
	}
	img, release, err := h.resolveRoot(ctx, &opts, nil)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", snap.Name, err)
	}
	if snap.Image != nil && (img.info == nil || img.info.Digest != snap.Image.Digest) {
		release()
		return nil, fmt.Errorf("%w: snapshot %s needs image %s", sbx.ErrImageNotFound, snap.Name, opts.Image)
	}
	if snap.Image != nil {
		opts.Image = snap.Image.Ref
		img.info.Ref = snap.Image.Ref
	}
	sb := &sbx.Sandbox{
		ID: state.NewID(), Name: opts.Name, Status: sbx.StatusCreating,
		Options: opts, Created: h.now().UTC(), Image: img.info,
	}
	sb.Resources = h.plan(sb)
	l, err := h.admit(ctx, sb)
	release()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	h.emit(changeCreated, sb)
	sb.CreateTimings = &sbx.CreateTimings{AdmitS: time.Since(t0).Seconds()}
	dir := h.snapshotDir(snap.Name)
	seed := func(upper string) error { return untarLayer(filepath.Join(dir, layerFile), upper) }
	start := func(p *provisioned) error { return h.restoreExecutor(ctx, sb, p, dir, ri) }
	made, err := h.keepVolumes(ctx, sb.ID, &sb.Options)
	if err == nil {
		err = h.buildWith(ctx, sb, img.lowers, seed, start)
	}
	if err != nil {
		if rerr := h.destroy(context.WithoutCancel(ctx), l, sb); rerr != nil {
			return nil, fmt.Errorf("restore %s: %w (and releasing what was created failed: %v; run sbx gc)", snap.Name, err, rerr)
		}
		h.dropMadeVolumes(context.WithoutCancel(ctx), made)
		return nil, fmt.Errorf("restore %s: %w", snap.Name, err)
	}
	now := h.now().UTC()
	sb.Started = &now
	sb.Status = sbx.StatusRunning
	sb.CreateTimings.TotalS = time.Since(t0).Seconds()
	if err := l.Write(sb); err != nil {
		_ = h.destroy(context.WithoutCancel(ctx), l, sb)
		return nil, err
	}
	h.emit(changeReady, sb)
	return sb, nil
}

// restoreExecutor restores the snapshot's processes (the executor and
// everything it runs) into the container of sb, whose root p has been
// made with the snapshot's writable layer, and gives the executor its
// listening socket. It runs in the sandbox's mount namespace.
func (h *Host) restoreExecutor(ctx context.Context, sb *sbx.Sandbox, p *provisioned, snapDir string, ri *restoreInfo) error {
	run := h.store.RunDir(sb.ID)
	sockDir := filepath.Join(run, socketDir)
	if err := os.Mkdir(sockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create socket directory: %w", err)
	}
	sockPath := filepath.Join(sockDir, socketName)
	executor, err := h.executorBinary()
	if err != nil {
		return err
	}
	if filepath.Base(executor) != ri.Executor {
		return fmt.Errorf("%w: the snapshot's processes run the executor %s of the sbx that made it, this sbx has %s: restore it with that sbx", sbx.ErrInvalid, ri.Executor, filepath.Base(executor))
	}
	spec, done, err := h.executorSpec(sb, p.root.Mounts, p.uns)
	if err != nil {
		return err
	}
	defer done()
	if spec.CgroupView, err = h.mountCgroupView(sb.ID); err != nil {
		return err
	}
	t0 := time.Now()
	ctr, err := isolate.Restore(h.containerRoot(), spec, isolate.RestoreOptions{
		ImageDir: filepath.Join(snapDir, criuImagesDir),
		WorkDir:  filepath.Join(run, criuWorkDir),
	})
	if err != nil {
		return err
	}
	go func() { _, _ = ctr.Wait() }()
	sb.Pid = ctr.Pid()
	sb.PidStart, _ = procStart(sb.Pid)
	sb.Socket = sockPath
	t1 := time.Now()
	if err := h.handover(ctx, sb.Pid, ri.Placeholder, run); err != nil {
		return fmt.Errorf("give the restored executor its socket: %w", err)
	}
	if err := h.waitReady(ctx, sockPath); err != nil {
		return fmt.Errorf("%w: %w%s", sbx.ErrNotReady, err, logTail(filepath.Join(run, executorLog)))
	}
	sb.CreateTimings.StartS = t1.Sub(t0).Seconds()
	sb.CreateTimings.ReadyS = time.Since(t1).Seconds()
	return nil
}

// resumeCheckpoint restores a sandbox stopped by a checkpoint in place:
// its root (the writable layer as the checkpoint left it) is still
// mounted. The snapshot is removed once the sandbox runs.
func (h *Host) resumeCheckpoint(ctx context.Context, l *state.Lock, sb *sbx.Sandbox) error {
	if _, err := h.criu(); err != nil {
		return err
	}
	_, ri, err := h.loadSnapshot(sb.Checkpoint)
	if err != nil {
		return fmt.Errorf("resume sandbox %s from its checkpoint: %w", sb.ShortID(), err)
	}
	if err := releaseContainer(ctx, h.containerRoot(), sb.ID); err != nil {
		return err
	}
	if sb.CreateTimings == nil {
		sb.CreateTimings = &sbx.CreateTimings{}
	}
	p := &provisioned{id: sb.ID, hostname: hostname(sb), opts: &sb.Options, root: &rootfs.Root{Path: sb.RootPath}, net: attachmentOf(sb)}
	err = h.inMountNS(sb.ID, func() error { return h.restoreExecutor(ctx, sb, p, h.snapshotDir(sb.Checkpoint), ri) })
	if err != nil {
		_ = releaseContainer(context.WithoutCancel(ctx), h.containerRoot(), sb.ID)
		return err
	}
	name := sb.Checkpoint
	now := h.now().UTC()
	sb.Status, sb.Started, sb.Stopped, sb.Checkpoint, sb.Idle = sbx.StatusRunning, &now, nil, "", false
	if err := l.Write(sb); err != nil {
		return err
	}
	h.emit(changeStarted, sb)
	if ri.Stop {
		// Made by stop --checkpoint for this start alone.
		if err := h.RemoveSnapshot(ctx, name); err != nil {
			h.log.Warn("remove the checkpoint a sandbox resumed from", "id", sb.ID, "snapshot", name, "err", err)
		}
	}
	return nil
}
