package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Create steps, in order. Each names the point just before the step's host
// resource is created; SBX_TEST_CRASH_AT=<step> kills the process there.
const (
	stepRecorded = "recorded" // record written, nothing created yet
	stepRunDir   = "rundir"   // about to create the runtime directory
	stepNetwork  = "network"  // about to attach the network (bridge mode)
	stepRootfs   = "rootfs"   // about to mount the root
	stepStart    = "start"    // about to start the container
	stepReady    = "ready"    // container started, waiting for the executor
	stepFinish   = "finish"   // executor answered, about to mark running
)

// CreateSteps lists the crash points of a create in order, for tests that
// interrupt a create at each of them.
var CreateSteps = []string{stepRecorded, stepRunDir, stepNetwork, stepRootfs, stepStart, stepReady, stepFinish}

// Create makes a new sandbox and starts it, returning once its executor
// answers. On any error everything created so far is released. If the
// process dies midway, the record left behind lets gc release it.
func (m *Manager) Create(ctx context.Context, opts Options) (*Sandbox, error) {
	m.reapExpired(ctx)
	if err := opts.validate(); err != nil {
		return nil, err
	}
	m.applyDefaults(&opts)
	now := m.now().UTC()
	sb := &Sandbox{
		ID:      state.NewID(),
		Name:    opts.Name,
		Status:  StatusCreating,
		Options: opts,
		Created: now,
	}
	if opts.TTL > 0 {
		exp := now.Add(opts.TTL)
		sb.ExpiresAt = &exp
	}
	sb.Resources = m.plan(sb)
	t0 := time.Now()
	// The image (or root directory) is checked, and pulled if need be,
	// before anything is recorded: a bad reference creates nothing. The
	// image store stays held until the record naming the image's layers is
	// written, from when on image GC keeps them.
	release, err := m.holdImages(ctx, opts)
	if err != nil {
		return nil, err
	}
	lowers, err := m.lowers(ctx, sb)
	if err != nil {
		release()
		return nil, err
	}
	l, err := m.admit(ctx, sb)
	release()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if m.onAdmit != nil {
		m.onAdmit(sb.ID)
	}
	m.emit(EventCreated, sb)
	m.crashPoint(stepRecorded)
	sb.CreateTimings = &CreateTimings{AdmitS: time.Since(t0).Seconds()}
	if err := m.build(ctx, sb, lowers); err != nil {
		m.log.Debug("create failed, releasing", "id", sb.ID, "err", err)
		if rerr := m.destroy(context.WithoutCancel(ctx), l, sb); rerr != nil {
			return nil, fmt.Errorf("create sandbox: %w (and releasing what was created failed: %v; run sbx gc)", err, rerr)
		}
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	m.crashPoint(stepFinish)
	started := m.now().UTC()
	sb.Started = &started
	sb.Status = StatusRunning
	sb.CreateTimings.TotalS = time.Since(t0).Seconds()
	if err := l.Write(sb); err != nil {
		_ = m.destroy(context.WithoutCancel(ctx), l, sb)
		return nil, err
	}
	m.emit(EventReady, sb)
	return sb, nil
}

func (m *Manager) applyDefaults(o *Options) {
	d := m.cfg.DefaultLimits
	if o.Limits.MemoryBytes == 0 {
		o.Limits.MemoryBytes = d.MemoryBytes
	}
	if o.Limits.CPUs == 0 {
		o.Limits.CPUs = d.CPUs
	}
	if o.Limits.Pids == 0 {
		o.Limits.Pids = d.Pids
	}
	if o.Limits.DiskBytes == 0 {
		o.Limits.DiskBytes = d.DiskBytes
	}
	o.Limits.DiskBytes = diskDefault(o.Limits.DiskBytes, o.Limits.MemoryBytes)
}

// plan lists every host resource the create will make. Their paths are
// fixed by the id, so the whole plan is recorded in the first write, before
// any of them exists; releasing a planned resource that was never made is
// a no-op.
func (m *Manager) plan(sb *Sandbox) []Resource {
	run := m.store.RunDir(sb.ID)
	plan := []Resource{{Kind: ResourceRunDir, Path: run}}
	if sb.Options.Network == string(netns.ModeBridge) {
		plan = append(plan, Resource{Kind: ResourceNetwork, ID: sb.ID})
	}
	return append(plan,
		Resource{Kind: ResourceRootfs, Path: filepath.Join(run, rootfsDir)},
		Resource{Kind: ResourceContainer, Path: m.containerRoot(), ID: sb.ID},
	)
}

// admit checks the limits, claims the id and name and writes the first
// record, all under the admission lock so that concurrent creates in other
// processes count each other.
func (m *Manager) admit(ctx context.Context, sb *Sandbox) (*state.Lock, error) {
	a, err := m.store.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	if err := m.checkLimits(sb); err != nil {
		return nil, err
	}
	l, err := m.store.Create(sb.ID)
	if err != nil {
		return nil, err
	}
	if sb.Name != "" {
		if err := m.store.ClaimName(sb.Name, sb.ID); err != nil {
			_ = l.Remove()
			return nil, err
		}
	}
	if err := l.Write(sb); err != nil {
		m.store.ReleaseName(sb.Name, sb.ID)
		_ = l.Remove()
		return nil, err
	}
	if sb.ExpiresAt != nil {
		if err := m.store.SetExpiry(sb.ID, *sb.ExpiresAt); err != nil {
			_ = m.forget(l, sb)
			return nil, err
		}
	}
	return l, nil
}

// checkLimits fails with ErrLimit if one more sandbox would exceed the
// configured count or memory budget, or the memory limit of the parent
// cgroup under which all sandboxes live. A configured budget is then
// applied to that parent, so the kernel holds all sandboxes to it too.
// Called under the admission lock.
func (m *Manager) checkLimits(sb *Sandbox) error {
	if m.cfg.MaxSandboxes > 0 {
		ids, err := m.store.IDs()
		if err != nil {
			return err
		}
		if len(ids) >= m.cfg.MaxSandboxes {
			return fmt.Errorf("%w: %d sandboxes exist and the maximum is %d; remove some (sbx rm, sbx gc)", ErrLimit, len(ids), m.cfg.MaxSandboxes)
		}
	}
	budget, want := m.cfg.MemoryBudget, sb.Options.Limits.MemoryBytes
	if budget > 0 && want == 0 {
		return fmt.Errorf("%w: a memory budget of %d bytes is configured, so every sandbox needs a memory limit (--memory)", ErrInvalid, budget)
	}
	parent, err := cgroup.ParentMemoryLimit()
	if err != nil {
		return err
	}
	if want == 0 || (budget == 0 && parent == 0) {
		return nil
	}
	entries, err := state.ReadAll[Sandbox](m.store)
	if err != nil {
		return err
	}
	var used int64
	for _, e := range entries {
		if e.Err == nil {
			used += e.Record.Options.Limits.MemoryBytes
		}
	}
	// The kernel keeps limits in whole pages: a budget reads back rounded.
	page := int64(os.Getpagesize())
	applied := budget > 0 && parent/page == budget/page
	if budget > 0 && used+want > budget {
		return fmt.Errorf("%w: memory budget: %d of %d bytes are given to other sandboxes, %d more do not fit", ErrLimit, used, budget, want)
	}
	if parent > 0 && !applied && used+want > parent {
		return fmt.Errorf("%w: the parent cgroup's memory budget: the cgroup %s allows all sandboxes %d bytes together, %d are given to other sandboxes, %d more do not fit; lower --memory or raise the parent's limit", ErrLimit, cgroup.Parent(), parent, used, want)
	}
	if budget > 0 && !applied {
		if err := cgroup.SetParentMemory(budget); err != nil {
			return fmt.Errorf("apply the memory budget to the parent cgroup: %w", err)
		}
	}
	return nil
}

// build creates the planned resources in order.
func (m *Manager) build(ctx context.Context, sb *Sandbox, lowers []string) error {
	m.crashPoint(stepRunDir)
	run := m.store.RunDir(sb.ID)
	if err := os.Mkdir(run, 0o700); err != nil {
		return fmt.Errorf("create runtime directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(run, rootOwnerFile), []byte(m.store.Root()), 0o600); err != nil {
		return fmt.Errorf("create runtime directory: %w", err)
	}
	return m.startRuntime(ctx, sb, lowers)
}

// destroy releases every resource of sb, newest first, and then forgets
// the sandbox. It is idempotent: after a failure it can simply run again
// (gc does that after a crash).
func (m *Manager) destroy(ctx context.Context, l *state.Lock, sb *Sandbox) error {
	if sb.Status != StatusRemoving && sb.Status != StatusCreating {
		sb.Status = StatusRemoving
		if err := l.Write(sb); err != nil {
			return err
		}
	}
	if err := m.release(ctx, sb); err != nil {
		return err
	}
	if err := m.forget(l, sb); err != nil {
		return err
	}
	m.emit(EventRemoved, sb)
	return nil
}

// release undoes the resources of sb, newest first, going on after errors.
func (m *Manager) release(ctx context.Context, sb *Sandbox) error {
	var errs []error
	for i := len(sb.Resources) - 1; i >= 0; i-- {
		r := sb.Resources[i]
		if err := m.releaseResource(ctx, sb, r); err != nil {
			errs = append(errs, fmt.Errorf("release %s %s: %w", r.Kind, r.Path, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) releaseResource(ctx context.Context, sb *Sandbox, r Resource) error {
	switch r.Kind {
	case ResourceRunDir:
		if err := m.releaseRunDir(r.Path); err != nil {
			return err
		}
	case ResourceRootfs:
		return m.releaseRootfs(r.Path)
	case ResourceContainer:
		return m.releaseContainer(ctx, r)
	case ResourceNetwork:
		n, err := m.network()
		if err != nil {
			return err
		}
		return n.Detach(ctx, r.ID)
	default:
		return fmt.Errorf("unknown resource kind %q (written by a newer sbx?)", r.Kind)
	}
	return nil
}

// forget drops the name, expiry and record of a released sandbox.
func (m *Manager) forget(l *state.Lock, sb *Sandbox) error {
	m.store.ClearExpiry(sb.ID)
	if sb.Name != "" {
		m.store.ReleaseName(sb.Name, sb.ID)
	}
	return l.Remove()
}

// diskDefault is the writable layer's cap when none was asked for: the
// memory limit, if there is one. The layer is a tmpfs whose pages count
// toward the memory limit, so a larger cap could never be filled: a write
// beyond the memory limit is OOM-killed rather than refused with ENOSPC.
// Capping at the memory limit makes the default case fail at that size
// (ENOSPC, or an OOM kill when other memory is in use too).
func diskDefault(disk, memory int64) int64 {
	if disk == 0 && memory > 0 {
		return memory
	}
	return disk
}
