package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/sandbox/state"
)

// errClaimRefused marks a claim error that is the request's fault (a name
// in use, a limit): the create fails with it rather than trying another
// member or a cold start.
type errClaimRefused struct{ err error }

func (e errClaimRefused) Error() string { return e.err.Error() }

func (e errClaimRefused) Unwrap() error { return e.err }

// errMemberGone is a pool member whose PID 1 is gone (its PID may be
// another process's now).
var errMemberGone = errors.New("the pool member's PID 1 is gone")

// checkMemberUser is checkDefaultUser for sb, a claimant of the pool
// member m, in m's root as its PID 1 sees it (/proc/PID/root). PID 1 is
// checked again after the lookup: an answer read from another process
// that reused the PID meanwhile is never taken (errMemberGone).
func checkMemberUser(m, sb *sbx.Sandbox) error {
	err := checkDefaultUser(sb, "/proc/"+strconv.Itoa(m.Pid)+"/root")
	if !pid1Alive(m) {
		return errMemberGone
	}
	return err
}

// claim takes an idle member of a pool whose key matches o (checked and
// completed by checkOptions) and img, applies what may differ, and returns
// it running. t0 is when the create started (its timings count from
// there). It returns nil, nil when no member can be had: the create
// then starts a sandbox itself. With a main command, a member that booted
// it comes first, then one whose command starts after the claim.
func (h *Host) claim(ctx context.Context, o *sbx.Options, img *sbx.ImageInfo, t0 time.Time) (*sbx.Sandbox, error) {
	key := poolKey(o, img)
	sb, err := h.claimKey(ctx, key, o, t0)
	if sb != nil || err != nil {
		return sb, err
	}
	if len(o.Cmd) == 0 {
		h.pools.miss(key)
		return nil, nil
	}
	plain := *o
	plain.Cmd = nil
	pkey := poolKey(&plain, img)
	if sb, err = h.claimKey(ctx, pkey, o, t0); sb == nil && err == nil {
		h.pools.miss(key, pkey)
	}
	return sb, err
}

// claimKey is claim among the members listed under key.
func (h *Host) claimKey(ctx context.Context, key string, o *sbx.Options, t0 time.Time) (*sbx.Sandbox, error) {
	tc := time.Now()
	dir := filepath.Join(h.store.Root(), pooledDir, key)
	ids, err := readDirNames(dir)
	if err != nil || len(ids) == 0 {
		return nil, nil
	}
	// Concurrent claimers start at different members, so they seldom
	// queue on the same lock.
	start := rand.IntN(len(ids))
	var busy []string
	for i := range ids {
		id := ids[(start+i)%len(ids)]
		l, err := h.store.TryLock(id)
		if err != nil {
			if errors.Is(err, state.ErrNotFound) {
				_ = os.Remove(filepath.Join(dir, id))
			} else {
				busy = append(busy, id) // another claimer, a remover, or its filler finishing
			}
			continue
		}
		if sb, err := h.claimMember(ctx, l, key, o, t0, tc); sb != nil || err != nil {
			return claimResult(sb, err)
		}
	}
	// A member whose record already says pooled may still be locked by the
	// filler that just started it: wait a moment for it rather than start
	// a sandbox cold. Another claimer's lock is as short; a remover's ends
	// the wait at busyMemberWait.
	for _, id := range busy {
		var m sbx.Sandbox
		if err := h.store.Read(id, &m); err != nil || m.Status != sbx.StatusPooled {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, busyMemberWait)
		l, err := h.store.Lock(wctx, id)
		cancel()
		if err != nil {
			continue
		}
		if sb, err := h.claimMember(ctx, l, key, o, t0, tc); sb != nil || err != nil {
			return claimResult(sb, err)
		}
	}
	return nil, nil
}

// claimMember runs claimLocked and unlocks: the claimed sandbox, or the
// request's own refusal, or (nil, nil) to try another member, or
// errClaimFailed when the member could not be personalised.
func (h *Host) claimMember(ctx context.Context, l *state.Lock, key string, o *sbx.Options, t0, tc time.Time) (*sbx.Sandbox, error) {
	sb, err := h.claimLocked(ctx, l, key, o, t0, tc)
	l.Unlock()
	var refused errClaimRefused
	if errors.As(err, &refused) {
		return nil, refused.err
	}
	if err != nil {
		// The member is gone; another would likely fail the same way (a
		// volume's directory missing...): the create starts cold, which
		// says what is wrong if the request is at fault.
		h.log.Warn("claim pool member failed; starting cold", "id", l.ID(), "err", err)
		return nil, errClaimFailed{err}
	}
	return sb, nil
}

// errClaimFailed ends a claim whose member could not be personalised:
// the create starts cold.
type errClaimFailed struct{ err error }

func (e errClaimFailed) Error() string { return "a claim failed: " + e.err.Error() }

// claimResult turns a failed claim (errClaimFailed) into none, so that
// the create starts cold.
func claimResult(sb *sbx.Sandbox, err error) (*sbx.Sandbox, error) {
	var failed errClaimFailed
	if errors.As(err, &failed) {
		return nil, nil
	}
	return sb, err
}

// claimLocked claims the locked sandbox if it is still an idle member with
// key (nil, nil if not). On an error other than errClaimRefused the
// member is removed: it may be half set up.
func (h *Host) claimLocked(ctx context.Context, l *state.Lock, key string, o *sbx.Options, t0, tc time.Time) (*sbx.Sandbox, error) {
	tr := h.newClaimTrace(ctx)
	var m sbx.Sandbox
	if err := l.Read(&m); err != nil {
		return nil, nil
	}
	tr.step("read")
	if m.Status != sbx.StatusPooled || m.Pool == "" || poolKey(&m.Options, m.Image) != key {
		if m.Status != sbx.StatusPooled && m.Status != sbx.StatusCreating {
			_ = os.Remove(h.pooledEntry(key, m.ID))
		}
		return nil, nil
	}
	if !pid1Alive(&m) {
		h.log.Warn("pool member died; removing it", "pool", m.Pool, "id", m.ID)
		if err := h.destroy(context.WithoutCancel(ctx), l, &m); err != nil {
			h.log.Warn("remove dead pool member", "id", m.ID, "err", err)
		}
		return nil, nil
	}
	tr.step("pid1")
	sb := m
	sb.Options = *o
	inspects := h.planClaimEgress(&sb)
	if inspects && len(m.Options.Cmd) > 0 {
		return nil, nil // its main command runs without the CA and placeholders
	}
	sb.Name = o.Name
	sb.Cmd = nil
	if len(m.Options.Cmd) > 0 {
		sb.Cmd = &sbx.CmdStart{Status: execapi.MainCmdRunning} // booted by the member
	}
	sb.Pool, sb.FromPool = "", m.Pool
	now := h.now().UTC()
	sb.Created, sb.Started, sb.ExpiresAt = now, &now, nil
	if exp := o.ExpiryAt(now, now); !exp.IsZero() {
		sb.ExpiresAt = &exp
	}
	// A default user the member's root lacks is the request's error, as
	// at a cold start (checkDefaultUser): the executor, which reads the
	// claimant's defaults later, would only refuse every command.
	if u := defaultUser(&sb); u != "" && u != defaultUser(&m) {
		if err := checkMemberUser(&m, &sb); errors.Is(err, errMemberGone) {
			return nil, nil
		} else if err != nil {
			return nil, errClaimRefused{err}
		}
	}
	// The claim is recorded before anything of the member changes: a
	// claim killed midway leaves a record being created, which gc removes
	// with the member, never a pooled one with another claimant's name,
	// rules or mounts. The memory budget is checked first, while the
	// member is untouched; the admission lock is held until the record
	// with the new limit is written, which the next admission counts.
	// Meanwhile the network is decided (its ports chosen), which changes
	// nothing either, and then what the member's personalisation needs
	// made on the host (its PID 1 opened, the mounts' detached trees,
	// which the member does not see). The change of the network is made
	// once all that is done, while the kept thread personalises.
	sb.Status = sbx.StatusCreating
	var (
		cn              *claimedNetwork
		err, nerr       error
		admitted, named bool
	)
	record := func(rec *sbx.Sandbox) error {
		var release func()
		if err := tr.side("admit", func() (err error) { release, err = h.admitClaim(ctx, &m, rec); return err }); err != nil {
			return errClaimRefused{err}
		}
		defer release()
		admitted = true
		if err := tr.side("write-creating", func() error { return h.writeKeepingVolumes(ctx, l, rec) }); err != nil {
			return err
		}
		if rec.Name != "" {
			if err := tr.side("claim-name", func() error { return h.store.ClaimName(rec.Name, rec.ID) }); err != nil {
				return errClaimRefused{err}
			}
			named = true
		}
		return nil
	}
	var (
		prep *personalisation
		perr error
	)
	prepare := func() {
		perr = tr.side("prepare", func() (err error) { prep, err = preparePersonalise(&m, &sb); return err })
	}
	if newHost, changed := networkChanges(&m, &sb); o.Network == sbx.NetworkBridge && (newHost || changed) {
		rec := sb
		recorded := make(chan error, 1)
		t0 := time.Now()
		go func() { tr.since("record-start", t0); recorded <- record(&rec) }()
		nerr = tr.side("network-decide", func() (err error) { cn, err = h.claimNetwork(ctx, &m, &sb); return err })
		if nerr == nil {
			prepare() // while the record is written, most often
		}
		err = <-recorded
	} else {
		// Nothing to wait for on the network's side: no goroutine to wake.
		if err = record(&sb); err == nil {
			if cn, nerr = h.claimNetwork(ctx, &m, &sb); nerr == nil {
				prepare()
			}
		}
	}
	tr.step("recorded")
	if prep != nil {
		defer prep.close()
	}
	if err != nil || nerr != nil || perr != nil {
		if cn != nil {
			cn.abort()
		}
		if !admitted {
			return nil, err // refused before anything was written
		}
		name := ""
		if named {
			name = sb.Name
		}
		return nil, h.claimFailed(ctx, l, &m, name, err, nerr, perr)
	}
	h.crashPoint(stepClaimRecorded)
	if inspects {
		if err := h.claimEgress(&m, &sb, o.Secrets); err != nil {
			cn.abort() // lets the network's lock go: dropMember changes the network
			return nil, h.dropMember(ctx, l, &m, sb.Name, err)
		}
	}
	// The member's entry in its pool's index goes while the kept thread
	// personalises the member (a file's removal may wait for a busy
	// disk's journal): a claimer that still finds it sees the record
	// being created and passes, and gc removes it with a claim that died.
	unlist := func() { _ = os.Remove(h.pooledEntry(key, sb.ID)) }
	if err := h.applyClaim(&m, &sb, cn, prep, tr, unlist); err != nil {
		return nil, h.dropMember(ctx, l, &m, sb.Name, err)
	}
	h.crashPoint(stepClaimApplied)
	tr.step("applied")
	sb.Status = sbx.StatusRunning
	sb.CreateTimings = &sbx.CreateTimings{AdmitS: tc.Sub(t0).Seconds(), ClaimS: time.Since(tc).Seconds(), TotalS: time.Since(t0).Seconds(),
		Pool: "hit, " + m.Pool}
	err = l.Write(&sb)
	if err == nil && sb.ExpiresAt != nil {
		err = h.store.SetExpiry(sb.ID, *sb.ExpiresAt)
	}
	if err != nil {
		return nil, h.dropMember(ctx, l, &m, sb.Name, err)
	}
	tr.step("write-running")
	h.pools.hit(m.Pool, key)
	h.emit(changeCreated, &sb)
	h.emit(changeReady, &sb)
	h.supervisor.askPoolRefill()
	tr.step("emit")
	tr.log(h, ctx, sb.ID)
	return &sb, nil
}

// Claim steps, in order, after the create steps' "recorded" of a cold
// create: SBX_TEST_CRASH_AT=<step> kills the process there.
const (
	stepClaimRecorded = "claim-recorded" // the claimant's record written (creating) and its name claimed, the member untouched
	stepClaimNetwork  = "claim-network"  // the ports' holder, the lease and the rules replaced; the hostname, mounts, limits and defaults being applied
	stepClaimApplied  = "claim-applied"  // limits, hostname, mounts, defaults applied; about to mark running
)

// ClaimSteps lists the crash points of a claim in order, for tests that
// interrupt a claim at each of them.
var ClaimSteps = []string{stepClaimRecorded, stepClaimNetwork, stepClaimApplied}

// claimFailed ends a claim of the locked member m that failed before
// anything of it changed, with name claimed (if not ""): recordErr from
// writing the record or claiming the name, netErr from deciding the
// network, prepErr from preparing the mounts. What the request is refused
// for (its name taken, its ports in use, a bad network option) puts the
// member back in its pool; anything else removes it.
func (h *Host) claimFailed(ctx context.Context, l *state.Lock, m *sbx.Sandbox, name string, recordErr, netErr, prepErr error) error {
	var refused errClaimRefused
	switch {
	case errors.As(recordErr, &refused):
		return h.unclaim(ctx, l, m, name, refused.err)
	case recordErr != nil:
		return h.dropMember(ctx, l, m, name, recordErr)
	case errors.Is(netErr, sbx.ErrInvalid) || errors.Is(netErr, sbx.ErrPortInUse):
		return h.unclaim(ctx, l, m, name, netErr)
	}
	return h.dropMember(ctx, l, m, name, errors.Join(netErr, prepErr))
}

// unclaim puts the locked member m, whose claim the request's own error
// refused before anything of it changed, back in its pool (its record as
// a member; its index entry is still there) and releases name. If that
// fails, the member is removed instead.
func (h *Host) unclaim(ctx context.Context, l *state.Lock, m *sbx.Sandbox, name string, err error) error {
	if name != "" {
		h.store.ReleaseName(name, m.ID)
	}
	if werr := l.Write(m); werr != nil {
		h.log.Warn("put a pool member back after a refused claim; removing it", "id", m.ID, "err", werr)
		if derr := h.destroy(context.WithoutCancel(ctx), l, m); derr != nil {
			h.log.Warn("remove pool member", "id", m.ID, "err", derr)
		}
	}
	return errClaimRefused{err}
}

// dropMember removes the locked member m, whose claim failed midway (it
// may be half personalised), with the claimant's name if it took one.
func (h *Host) dropMember(ctx context.Context, l *state.Lock, m *sbx.Sandbox, name string, err error) error {
	m.Name = name
	if rerr := h.destroy(context.WithoutCancel(ctx), l, m); rerr != nil {
		h.log.Warn("remove pool member whose claim failed", "id", m.ID, "err", rerr)
	}
	return fmt.Errorf("claim pool member %s: %w", m.ShortID(), err)
}

// admitClaim checks a claimed member's new memory limit against the
// host's budgets, as a create's admission does, and holds the admission
// lock until the caller has written the new record (release).
func (h *Host) admitClaim(ctx context.Context, m, sb *sbx.Sandbox) (func(), error) {
	want := sb.Options.Limits.MemoryBytes
	if want == m.Options.Limits.MemoryBytes {
		return func() {}, nil
	}
	if h.cfg.MemoryBudget > 0 && want == 0 {
		return nil, fmt.Errorf("%w: a memory budget of %d bytes is configured, so every sandbox needs a memory limit (--memory)", sbx.ErrInvalid, h.cfg.MemoryBudget)
	}
	a, err := h.store.Admit(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.checkMemory(want, sb.ID); err != nil {
		a.Release()
		return nil, err
	}
	return a.Release, nil
}

// applyClaim applies to the running member m what sb asks for beyond its
// key, with claimNetwork's cn (the /etc files to write, the change of
// lease and rules) and prep (preparePersonalise's): the hostname, /etc
// files, mounts and the writable layer's size on a namespace thread
// (startPersonalise), and meanwhile, on the caller's, the network's
// change, the cgroup limits and the command defaults of later commands
// (writeClaimDefaults). They touch different things; no goroutine is
// started for any of it (unless the kept thread is busy with another
// claim's): on a busy host a new goroutine waits for a free thread longer
// than the network's change takes. meanwhile runs last on the caller's
// thread, before the wait.
func (h *Host) applyClaim(m, sb *sbx.Sandbox, cn *claimedNetwork, prep *personalisation, tr *claimTrace, meanwhile func()) error {
	wait := h.startPersonalise(prep, sb, cn.etc, tr)
	cn.apply()
	h.crashPoint(stepClaimNetwork)
	tr.step("network-applied")
	var errs []error
	ol, nl := m.Options.Limits, sb.Options.Limits
	if ol.MemoryBytes != nl.MemoryBytes || ol.CPUs != nl.CPUs || ol.Pids != nl.Pids {
		errs = append(errs, tr.side("cgroup", func() error {
			return cgroup.Update(sb.ID, cgroup.Limits{MemoryBytes: nl.MemoryBytes, CPUs: nl.CPUs, Pids: nl.Pids}.WithInitAllowance())
		}))
	}
	if d := commandDefaults(sb); !sameDefaults(d, prep.oldDefaults) {
		errs = append(errs, tr.side("defaults", func() error { return writeClaimDefaults(prep.pm, d) }))
	}
	meanwhile()
	tr.step("applied-here")
	errs = append(errs, wait())
	tr.step("personalised")
	errs = append(errs, cn.wait())
	return errors.Join(errs...)
}

// commandDefaults are the environment, working directory and user the
// executor gives commands of sb: the image's, with the options' on top.
func commandDefaults(sb *sbx.Sandbox) execapi.Defaults {
	env, wd, user := sb.Options.Env, sb.Options.Workdir, sb.Options.User
	if sb.Image != nil {
		env = sbx.MergeEnv(sb.Image.Env, sb.Options.Env)
		if wd == "" {
			wd = sb.Image.Workdir
		}
		if user == "" {
			user = sb.Image.User
		}
	}
	if wd == "" {
		wd = "/"
	}
	return execapi.Defaults{Env: withPath(env), Workdir: wd, User: user}
}
