package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
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
// answers and Options.Cmd, if any, has started. On any error everything
// created so far is released. If the process dies midway, the record left
// behind lets GC release it.
func (h *Host) Create(ctx context.Context, opts sbx.Options) (*sbx.Sandbox, error) {
	return h.create(ctx, opts, h.cfg.Policy, "")
}

// create makes a sandbox as policy allows. With pool empty, it claims an
// idle member of a warm pool whose key matches, if there is one; else it
// starts a sandbox, which with pool set becomes an idle member of that
// pool (status pooled, no name, labels, TTL or cmd) rather than running.
func (h *Host) create(ctx context.Context, opts sbx.Options, policy *sbx.Policy, pool string) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	if err := h.checkOptions(&opts, true, policy); err != nil {
		return nil, err
	}
	if n := len(h.store.RunDir(state.NewID())) + len("/"+socketDir+"/"+socketName); n >= maxSocketPath {
		return nil, fmt.Errorf("%w: run root %s is too long: executor socket paths would have %d bytes, the kernel allows %d; use a shorter --run-root", sbx.ErrInvalid, h.store.RunRoot(), n, maxSocketPath-1)
	}
	t0 := time.Now()
	// The image (or root directory) is checked, and pulled if need be,
	// before anything is recorded: a bad reference creates nothing. The
	// image store stays held until the record naming the image's layers is
	// written, from when on image GC keeps them.
	img, release, err := h.resolveRoot(ctx, &opts, nil)
	if err != nil {
		return nil, err
	}
	miss := ""
	if pool == "" {
		sb, reason, err := h.claimIfClaimable(ctx, &opts, img.info, t0)
		miss = reason
		if sb != nil || err != nil {
			release()
			if err == nil {
				err = h.startCmdOrRemove(ctx, sb)
			}
			if err != nil {
				return nil, err
			}
			return sb, nil
		}
	}
	if err := checkWorkdir(&opts, img.lowers); err != nil {
		release()
		return nil, err
	}
	// Secret values go to the host-side egress state, never the record.
	secrets := opts.Secrets
	opts.Secrets = sbx.WithoutSecretValues(secrets)
	now := h.now().UTC()
	sb := &sbx.Sandbox{
		ID:      state.NewID(),
		Name:    opts.Name,
		Status:  sbx.StatusCreating,
		Options: opts,
		Created: now,
		Image:   img.info,
		Pool:    pool,
	}
	if exp := opts.ExpiryAt(now, now); !exp.IsZero() {
		sb.ExpiresAt = &exp
	}
	sb.Resources = h.plan(sb)
	l, err := h.admit(ctx, sb)
	release()
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if h.onAdmit != nil {
		h.onAdmit(sb.ID)
	}
	h.emit(changeCreated, sb)
	h.crashPoint(stepRecorded)
	isolate.WarmCgroups(sb.ID) // recorded: removed with the container (plan)
	sb.CreateTimings = &sbx.CreateTimings{AdmitS: time.Since(t0).Seconds()}
	if miss != "" {
		sb.CreateTimings.Pool = "miss, " + miss
	}
	made, err := h.keepVolumes(ctx, sb.ID, &sb.Options)
	if err == nil {
		err = h.writeEgressState(sb, secrets)
	}
	if err == nil {
		err = h.build(ctx, sb, img.lowers)
	}
	if err != nil {
		h.log.Debug("create failed, releasing", "id", sb.ID, "err", err)
		if rerr := h.destroy(context.WithoutCancel(ctx), l, sb); rerr != nil {
			return nil, fmt.Errorf("create sandbox: %w (and releasing what was created failed: %v; run sbx gc)", err, rerr)
		}
		h.dropMadeVolumes(context.WithoutCancel(ctx), made)
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	h.crashPoint(stepFinish)
	started := h.now().UTC()
	sb.Started = &started
	sb.Status = sbx.StatusRunning
	sb.CreateTimings.TotalS = time.Since(t0).Seconds()
	if pool != "" {
		err = h.readyMember(ctx, l, sb)
	} else {
		err = h.startLease(sb, started)
		if err == nil {
			err = l.Write(sb)
		}
	}
	if err != nil {
		if h.destroy(context.WithoutCancel(ctx), l, sb) == nil {
			h.dropMadeVolumes(context.WithoutCancel(ctx), made)
		}
		return nil, err
	}
	h.emit(changeReady, sb)
	if sb.Options.Network == sbx.NetworkBridge {
		h.supervisor.askPrepareNetworks()
	}
	l.Unlock() // startCmdOrRemove takes it again to remove
	if err := h.startCmdOrRemove(ctx, sb); err != nil {
		h.dropMadeVolumes(context.WithoutCancel(ctx), made) // unless the sandbox is left
		return nil, err
	}
	return sb, nil
}

// startLease starts the owner lease of a sandbox whose create ends at
// started: its owner can renew only once the create returned, and the
// set-up may take longer than the lease (a loaded machine, a slow start),
// so the lease runs from there, not from the record's creation; a TTL
// still runs from the creation. The expiry index gets the deadline
// first (one it has that the record lacks is only looked at early).
func (h *Host) startLease(sb *sbx.Sandbox, started time.Time) error {
	if sb.Options.Lease <= 0 {
		return nil
	}
	exp := sb.Options.ExpiryAt(sb.Created, started)
	if err := h.store.SetExpiry(sb.ID, exp); err != nil {
		return fmt.Errorf("start the lease of sandbox %s: %w", sb.ShortID(), err)
	}
	sb.ExpiresAt = &exp
	return nil
}

// startCmdOrRemove starts Options.Cmd of a new sandbox, if it has one
// and it is not running yet (a pool member booted it); when the command
// cannot start, the create fails as a whole and the sandbox is removed.
func (h *Host) startCmdOrRemove(ctx context.Context, sb *sbx.Sandbox) error {
	if len(sb.Options.Cmd) == 0 || sb.Cmd != nil {
		return nil
	}
	cs, err := h.startMainCmd(ctx, sb)
	if err != nil {
		if rerr := h.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); rerr != nil {
			h.log.Warn("remove sandbox whose cmd did not start", "id", sb.ID, "err", rerr)
		}
		return err
	}
	sb.Cmd = cs
	return nil
}

// checkOptions validates o, applies policy (nil allows everything) and
// fills in the defaults. create is set for Create (an image or rootfs is
// required); Run also allows host mode.
func (h *Host) checkOptions(o *sbx.Options, create bool, policy *sbx.Policy) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if create && o.Image == "" && o.Rootfs == "" {
		return fmt.Errorf("%w: give exactly one of an image and a root directory (--rootfs)", sbx.ErrInvalid)
	}
	if o.Network == "" {
		o.Network = sbx.NetworkNone
	}
	if o.UserNS == "" {
		o.UserNS = sbx.DefaultUserNS(o)
	}
	if _, err := parseNetwork(o, ""); err != nil {
		return err
	}
	if err := applyPolicy(policy, o); err != nil {
		return err
	}
	h.resolveVolumes(o)
	if err := h.checkIdleOptions(o); err != nil {
		return err
	}
	if o.Network == sbx.NetworkHost {
		h.log.Warn("network host: the sandbox shares the host's network namespace; nothing of the network is isolated")
	}
	if o.UserNS == sbx.UserNSPrivate && len(o.Ulimits) > 0 && !hasCapability(unix.CAP_SYS_RESOURCE) {
		// libcontainer sets them from the host side (prlimit), which on
		// another user's ids needs the capability even to lower a limit.
		return fmt.Errorf("%w: --ulimit (ulimits) in a private user namespace (the default) needs CAP_SYS_RESOURCE, which sbx lacks on this host (sbx info says so): the limits are set from the host side on the sandbox's unprivileged ids; add --userns host, or run sbx with that capability", sbx.ErrUnsupported)
	}
	if o.UserNS == sbx.UserNSPrivate {
		if err := rootfs.ParentsTraversable(h.store.RunRoot()); err != nil {
			return fmt.Errorf("%w: a private user namespace (the default): %w; or create the sandbox with --userns host", sbx.ErrUnsupported, err)
		}
	}
	d := h.cfg.DefaultLimits
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
	return nil
}

// plan lists every host resource the create will make. Their paths are
// fixed by the id, so the whole plan is recorded in the first write, before
// any of them exists; releasing a planned resource that was never made is
// a no-op.
func (h *Host) plan(sb *sbx.Sandbox) []sbx.Resource {
	run := h.store.RunDir(sb.ID)
	plan := []sbx.Resource{{Kind: sbx.ResourceRunDir, Path: run}}
	if sb.Options.Network == sbx.NetworkBridge {
		plan = append(plan, sbx.Resource{Kind: sbx.ResourceNetwork, ID: sb.ID})
		if needsEgressState(&sb.Options) {
			plan = append(plan, sbx.Resource{Kind: sbx.ResourceEgressState, Path: h.egressStateDir(sb.ID)})
		}
	}
	if sb.Options.UserNS == sbx.UserNSPrivate {
		plan = append(plan, sbx.Resource{Kind: sbx.ResourceUserNS, Path: sandboxOwner(h.store.Root(), sb.ID)})
	}
	return append(plan,
		sbx.Resource{Kind: sbx.ResourceRootfs, Path: filepath.Join(run, rootfsDir)},
		sbx.Resource{Kind: sbx.ResourceContainer, Path: h.containerRoot(), ID: sb.ID},
	)
}

// admit checks the limits, claims the id and name and writes the first
// record, all under the admission lock so that concurrent creates in other
// processes count each other.
func (h *Host) admit(ctx context.Context, sb *sbx.Sandbox) (*state.Lock, error) {
	a, err := h.store.Admit(ctx)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	if err := h.checkLimits(sb); err != nil {
		return nil, err
	}
	l, err := h.store.Create(sb.ID)
	if err != nil {
		return nil, err
	}
	if sb.Name != "" {
		if err := h.store.ClaimName(sb.Name, sb.ID); err != nil {
			_ = l.Remove()
			return nil, err
		}
	}
	if err := l.Write(sb); err != nil {
		h.store.ReleaseName(sb.Name, sb.ID)
		_ = l.Remove()
		return nil, err
	}
	if sb.ExpiresAt != nil {
		if err := h.store.SetExpiry(sb.ID, *sb.ExpiresAt); err != nil {
			_ = h.forget(l, sb)
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
func (h *Host) checkLimits(sb *sbx.Sandbox) error {
	if h.cfg.MaxSandboxes > 0 {
		ids, err := h.store.IDs()
		if err != nil {
			return err
		}
		if len(ids) >= h.cfg.MaxSandboxes {
			return fmt.Errorf("%w: %d sandboxes exist and the maximum is %d; remove some (sbx rm, sbx gc)", sbx.ErrLimit, len(ids), h.cfg.MaxSandboxes)
		}
	}
	want := sb.Options.Limits.MemoryBytes
	if h.cfg.MemoryBudget > 0 && want == 0 {
		return fmt.Errorf("%w: a memory budget of %d bytes is configured, so every sandbox needs a memory limit (--memory)", sbx.ErrInvalid, h.cfg.MemoryBudget)
	}
	return h.checkMemory(want, "")
}

// checkMemory fails with ErrLimit if want more bytes of memory limit do
// not fit the memory budget or the parent cgroup's limit, besides the
// limits of the other sandboxes (all but except). Called under the
// admission lock.
func (h *Host) checkMemory(want int64, except string) error {
	budget := h.cfg.MemoryBudget
	parent, err := cgroup.ParentMemoryLimit()
	if err != nil {
		return err
	}
	if want == 0 || (budget == 0 && parent == 0) {
		return nil
	}
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return err
	}
	var used int64
	for _, e := range entries {
		if e.Err == nil && e.ID != except {
			used += e.Record.Options.Limits.MemoryBytes
		}
	}
	// The kernel keeps limits in whole pages: a budget reads back rounded.
	page := int64(os.Getpagesize())
	applied := budget > 0 && parent/page == budget/page
	if budget > 0 && used+want > budget {
		return fmt.Errorf("%w: memory budget: %d of %d bytes are given to other sandboxes, %d more do not fit", sbx.ErrLimit, used, budget, want)
	}
	if parent > 0 && !applied && used+want > parent {
		return fmt.Errorf("%w: the parent cgroup's memory budget: the cgroup %s allows all sandboxes %d bytes together, %d are given to other sandboxes, %d more do not fit; lower --memory or raise the parent's limit", sbx.ErrLimit, cgroup.Parent(), parent, used, want)
	}
	if budget > 0 && !applied {
		if err := cgroup.SetParentMemory(budget); err != nil {
			return fmt.Errorf("apply the memory budget to the parent cgroup: %w", err)
		}
	}
	return nil
}

// build creates the planned resources in order: the runtime directory,
// the network and root (provision), and the container with the executor.
func (h *Host) build(ctx context.Context, sb *sbx.Sandbox, lowers []string) error {
	return h.buildWith(ctx, sb, lowers, nil, func(p *provisioned) error {
		userRoot := p.root.Path
		if len(lowers) == 0 {
			userRoot = "/" // host mode: the host's passwd and group
		}
		if err := checkDefaultUser(sb, userRoot); err != nil {
			return err
		}
		return h.startExecutor(ctx, sb, p.root.Mounts, p.uns)
	})
}

// buildWith is build with the writable layer filled by seed (if set)
// and the container made by start, in the sandbox's mount namespace.
func (h *Host) buildWith(ctx context.Context, sb *sbx.Sandbox, lowers []string, seed func(upper string) error, start func(p *provisioned) error) error {
	h.crashPoint(stepRunDir)
	run := h.store.RunDir(sb.ID)
	if err := os.Mkdir(run, 0o700); err != nil {
		return fmt.Errorf("create runtime directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(run, rootOwnerFile), []byte(h.store.Root()), 0o600); err != nil {
		return fmt.Errorf("create runtime directory: %w", err)
	}
	p := &provisioned{id: sb.ID, hostname: hostname(sb), opts: &sb.Options, lowers: lowers, dir: filepath.Join(run, rootfsDir), seed: seed,
		member: sb.Pool != ""}
	if sb.Options.UserNS == sbx.UserNSPrivate {
		p.usernsOwner = sandboxOwner(h.store.Root(), sb.ID)
	}
	defer p.closeUserNS()
	h.crashPoint(stepNetwork)
	if err := h.attachNetwork(ctx, p); err != nil {
		return err
	}
	sb.Network = networkInfo(p.net)
	if sb.Options.Network != sbx.NetworkBridge {
		sb.Network = nil
	}
	// The root is mounted, and the container started, in the sandbox's
	// own mount namespace: the host's mount table stays the same size
	// however many sandboxes run (see rootfs.Namespaces).
	cgroup.OpenRootHandle()
	return h.mountNS.Create(sb.ID, func() error {
		if err := h.prepareRoot(p, h.crashPoint); err != nil {
			return err
		}
		if err := h.addEgressTrust(sb, p.root.Path); err != nil {
			return err
		}
		sb.RootPath = p.root.Path
		sb.CreateTimings.NetworkS, sb.CreateTimings.FromPool, sb.CreateTimings.RootfsS = p.networkS, p.fromPool, p.rootfsS
		return start(p)
	})
}

// inMountNS runs fn where sandbox id's mounts are: on a thread in its
// own mount namespace, or on the host for a sandbox created by an sbx
// that mounted there. fn must resolve its paths itself (its goroutines run
// on the host).
func (h *Host) inMountNS(id string, fn func() error) error {
	if !h.mountNS.Has(id) {
		return fn()
	}
	return h.mountNS.Enter(id, fn)
}

// destroy releases every resource of sb, newest first, and then forgets
// the sandbox. It is idempotent: after a failure it can simply run again
// (GC does that after a crash).
func (h *Host) destroy(ctx context.Context, l *state.Lock, sb *sbx.Sandbox) error {
	if sb.Status != sbx.StatusRemoving && sb.Status != sbx.StatusCreating {
		sb.Status = sbx.StatusRemoving
		if err := l.Write(sb); err != nil {
			return err
		}
	}
	if err := h.release(ctx, sb.Resources); err != nil {
		return err
	}
	// The checkpoint of a stop --checkpoint (or of the idle timeout) holds
	// the sandbox's memory: it goes with the sandbox.
	if err := h.dropStopCheckpoint(ctx, sb); err != nil {
		return err
	}
	if err := h.forget(l, sb); err != nil {
		return err
	}
	h.emit(changeRemoved, sb)
	return nil
}

// release undoes resources (a sandbox's plan, or a one-shot run's),
// newest first, going on after errors. It is the teardown of both: Remove
// and gc release a sandbox's recorded plan, gc the plan of a run whose
// process died, and a run removing itself releases its plan through
// releaseResource too (run.remove), with the container it holds in hand.
func (h *Host) release(ctx context.Context, resources []sbx.Resource) error {
	var errs []error
	for i := len(resources) - 1; i >= 0; i-- {
		errs = append(errs, h.releaseResource(ctx, resources[i]))
	}
	return errors.Join(errs...)
}

// releaseResource undoes one resource; undoing one never made, or already
// undone, is a no-op.
func (h *Host) releaseResource(ctx context.Context, r sbx.Resource) error {
	if err := h.undoResource(ctx, r); err != nil {
		return fmt.Errorf("release %s %s: %w", r.Kind, r.Path, err)
	}
	return nil
}

func (h *Host) undoResource(ctx context.Context, r sbx.Resource) error {
	switch r.Kind {
	case sbx.ResourceRootfs:
		// The sandbox's mount namespace goes first (its mounts with it,
		// once its processes are gone); then whatever an older sbx
		// mounted on the host. Unmounting first matters: removing
		// through a still-mounted volume would delete host files.
		if err := h.mountNS.Remove(filepath.Base(filepath.Dir(r.Path))); err != nil {
			return err
		}
		return cleanupDir(r.Path)
	case sbx.ResourceRunDir:
		return cleanupDir(r.Path)
	case sbx.ResourceContainer:
		return releaseContainer(ctx, r.Path, r.ID)
	case sbx.ResourceNetwork:
		n, err := h.network()
		if err != nil {
			return err
		}
		return n.Detach(ctx, r.ID)
	case sbx.ResourceUserNS:
		return releaseUserNS(h.cfg.UserNSDir, r.Path)
	case sbx.ResourceEgressState:
		return removeEgressState(r.Path)
	}
	return fmt.Errorf("unknown resource kind %q (written by a newer sbx?)", r.Kind)
}

// forget drops the name, expiry and record of a released sandbox.
func (h *Host) forget(l *state.Lock, sb *sbx.Sandbox) error {
	h.store.ClearExpiry(sb.ID)
	if sb.Name != "" {
		h.store.ReleaseName(sb.Name, sb.ID)
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
