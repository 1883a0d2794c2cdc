package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Warm pools. A pool's definition is a file under Root/pools; its members
// are ordinary sandboxes whose record names the pool (Sandbox.Pool) and
// whose status is pooled once their executor answered. A ready member is
// also listed under Root/pooled/KEY/ID, KEY being the hash of everything
// fixed at start (poolKey), so that a create finds the members it may
// claim by reading one small directory. The claim itself happens under the
// member's lock: whoever takes it first and still finds it pooled owns it.
// The CLI and a server share all of it, so claims work without a daemon;
// a server also refills its pools in the background.

const (
	poolsDir  = "pools"  // Root/pools/NAME.json: definitions; NAME.lock: fill lock
	pooledDir = "pooled" // Root/pooled/KEY/ID: the index of ready members
)

// poolDef is a pool's definition on disk.
type poolDef struct {
	Spec    sbx.PoolSpec `json:"spec"`
	Created time.Time    `json:"created"`
}

// poolKey hashes the options of o fixed at start (the fields
// sbx.OptionClasses classes sbx.PoolKey), with the image it resolved to
// (nil for a root directory) by digest.
func poolKey(o *sbx.Options, img *sbx.ImageInfo) string {
	k := sbx.PoolKeyValues(o)
	k["image"], k["rootfs"] = "rootfs:"+o.Rootfs, nil
	if img != nil {
		k["image"] = "image:" + img.Digest
	}
	data, _ := json.Marshal(k)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (h *Host) poolDefPath(name string) string {
	return filepath.Join(h.store.Root(), poolsDir, name+".json")
}

func (h *Host) poolLockPath(name string) string {
	return filepath.Join(h.store.Root(), poolsDir, name+".lock")
}

func (h *Host) pooledEntry(key, id string) string {
	return filepath.Join(h.store.Root(), pooledDir, key, id)
}

// readPoolDef reads the definition of pool name.
func (h *Host) readPoolDef(name string) (*poolDef, error) {
	if err := sbx.ValidPoolName(name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(h.poolDefPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pool %q: %w (sbx pool ls lists them)", name, sbx.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read pool %q: %w", name, err)
	}
	var d poolDef
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("pool %q: unreadable definition %s: %w (sbx pool rm it)", name, h.poolDefPath(name), err)
	}
	return &d, nil
}

// poolNames lists the defined pools, sorted.
func (h *Host) poolNames() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(h.store.Root(), poolsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && sbx.ValidPoolName(n) == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

// CreatePool defines a pool. Its options are checked against the host's
// policy and the image is pulled now if it is missing (as the options'
// pull policy says); no member starts yet (FillPool, or a server's
// background refill).
func (h *Host) CreatePool(ctx context.Context, spec sbx.PoolSpec) (*sbx.Pool, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := h.checkOptions(&spec.Options, true, h.cfg.Policy); err != nil {
		return nil, err
	}
	img, release, err := h.resolveRoot(ctx, &spec.Options, nil)
	if err != nil {
		return nil, err
	}
	release()
	if err := os.MkdirAll(filepath.Join(h.store.Root(), poolsDir), 0o700); err != nil {
		return nil, fmt.Errorf("create pool directory: %w", err)
	}
	d := poolDef{Spec: spec, Created: h.now().UTC()}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	// O_EXCL claims the name; the content follows by rename, so a reader
	// never sees a half-written definition.
	path := h.poolDefPath(spec.Name)
	f, err := os.OpenFile(path+".new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: pool %q is being defined by another process", sbx.ErrBusy, spec.Name)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(path + ".new")
		return nil, fmt.Errorf("write pool %q: %w", spec.Name, errors.Join(werr, cerr))
	}
	// link fails if the name exists; rename would replace it.
	err = os.Link(path+".new", path)
	_ = os.Remove(path + ".new")
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: pool %q exists (sbx pool rm it first)", sbx.ErrNameInUse, spec.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("write pool %q: %w", spec.Name, err)
	}
	return &sbx.Pool{PoolSpec: spec, Key: poolKey(&spec.Options, img.info), Ready: []string{}, Created: d.Created}, nil
}

// poolMembers reads the records of every sandbox still in a pool, by
// pool name.
func (h *Host) poolMembers() (map[string][]*sbx.Sandbox, error) {
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return nil, err
	}
	out := map[string][]*sbx.Sandbox{}
	for i := range entries {
		if e := &entries[i]; e.Err == nil && e.Record.Pool != "" {
			out[e.Record.Pool] = append(out[e.Record.Pool], &e.Record)
		}
	}
	return out, nil
}

// poolStatus is the pool's definition with its members now. The key is
// that of the image as the cache resolves it now, without pulling.
func (h *Host) poolStatus(ctx context.Context, d *poolDef, members []*sbx.Sandbox) *sbx.Pool {
	p := &sbx.Pool{PoolSpec: d.Spec, Created: d.Created, Ready: []string{}}
	o := d.Spec.Options
	if err := h.checkOptions(&o, true, h.cfg.Policy); err == nil {
		o.Pull = sbx.PullNever
		if img, release, err := h.resolveRoot(ctx, &o, nil); err == nil {
			release()
			p.Key = poolKey(&o, img.info)
		}
	}
	for _, m := range members {
		switch m.Status {
		case sbx.StatusPooled:
			p.Ready = append(p.Ready, m.ID)
		case sbx.StatusCreating:
			p.Starting++
		}
	}
	return p
}

// ListPools returns every pool with its members, by name.
func (h *Host) ListPools(ctx context.Context) ([]*sbx.Pool, error) {
	names, err := h.poolNames()
	if err != nil {
		return nil, err
	}
	members, err := h.poolMembers()
	if err != nil {
		return nil, err
	}
	out := []*sbx.Pool{}
	for _, n := range names {
		d, err := h.readPoolDef(n)
		if errors.Is(err, sbx.ErrNotFound) {
			continue // removed while listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, h.poolStatus(ctx, d, members[n]))
	}
	return out, nil
}

// GetPool returns one pool with its members.
func (h *Host) GetPool(ctx context.Context, name string) (*sbx.Pool, error) {
	d, err := h.readPoolDef(name)
	if err != nil {
		return nil, err
	}
	members, err := h.poolMembers()
	if err != nil {
		return nil, err
	}
	return h.poolStatus(ctx, d, members[name]), nil
}

// FillPool starts members until the pool has Size ready ones, one at a
// time, after removing the members that no longer match its key (the
// image's tag moved) or whose PID 1 died. Two fills of one pool never run
// at once: the second waits for the first.
func (h *Host) FillPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	if err := sbx.ValidPoolName(name); err != nil {
		return nil, err
	}
	unlock, err := state.LockFile(ctx, h.poolLockPath(name))
	if err != nil {
		return nil, err
	}
	defer unlock()
	return h.fillLocked(ctx, name)
}

// fillLocked is FillPool with the pool's lock held.
func (h *Host) fillLocked(ctx context.Context, name string) (*sbx.PoolReport, error) {
	rep := &sbx.PoolReport{}
	d, err := h.readPoolDef(name)
	if err != nil {
		return rep, err
	}
	if err := d.Spec.Validate(); err != nil {
		return rep, fmt.Errorf("pool %q: %w (defined by an older sbx: sbx pool rm it and create it again)", name, err)
	}
	o := d.Spec.Options
	if err := h.checkOptions(&o, true, h.cfg.Policy); err != nil {
		return rep, err
	}
	img, release, err := h.resolveRoot(ctx, &o, nil)
	if err != nil {
		return rep, err
	}
	release()
	key := poolKey(&o, img.info)
	members, err := h.poolMembers()
	if err != nil {
		return rep, err
	}
	ready := 0
	for _, m := range members[name] {
		if m.Status != sbx.StatusPooled {
			continue // being created by a fill that died: gc's
		}
		if poolKey(&m.Options, m.Image) == key && pid1Alive(m) && ready < d.Spec.Size {
			ready++
			continue
		}
		if h.removeMember(ctx, m.ID, name, false) {
			rep.Removed = append(rep.Removed, m.ID)
		}
	}
	for ; ready < d.Spec.Size; ready++ {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		sb, err := h.create(ctx, d.Spec.Options, h.cfg.Policy, name)
		if err != nil {
			return rep, fmt.Errorf("start a member of pool %q: %w", name, err)
		}
		rep.Started = append(rep.Started, sb.ID)
	}
	return rep, nil
}

// removeMember removes sandbox id if it is still an unclaimed member of
// pool (any status with wait, else only a pooled one whose lock is free),
// reporting whether it did.
func (h *Host) removeMember(ctx context.Context, id, pool string, wait bool) bool {
	var l *state.Lock
	var err error
	if wait {
		l, err = h.store.Lock(ctx, id)
	} else {
		l, err = h.store.TryLock(id)
	}
	if err != nil {
		return false
	}
	defer l.Unlock()
	var sb sbx.Sandbox
	if err := l.Read(&sb); err != nil || sb.Pool != pool || (!wait && sb.Status != sbx.StatusPooled) {
		return false
	}
	if err := h.destroy(context.WithoutCancel(ctx), l, &sb); err != nil {
		h.log.Warn("remove pool member", "pool", pool, "id", id, "err", err)
		return false
	}
	return true
}

// DrainPool removes every unclaimed member of the pool, waiting for
// members being created. The definition stays; a server refills it.
func (h *Host) DrainPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	if _, err := h.readPoolDef(name); err != nil {
		return nil, err
	}
	return h.drain(ctx, name)
}

func (h *Host) drain(ctx context.Context, name string) (*sbx.PoolReport, error) {
	unlock, err := state.LockFile(ctx, h.poolLockPath(name))
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep := &sbx.PoolReport{}
	members, err := h.poolMembers()
	if err != nil {
		return rep, err
	}
	for _, m := range members[name] {
		if h.removeMember(ctx, m.ID, name, true) {
			rep.Removed = append(rep.Removed, m.ID)
		}
	}
	return rep, nil
}

// RemovePool removes the pool's definition, then its unclaimed members.
func (h *Host) RemovePool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	if _, err := h.readPoolDef(name); err != nil {
		return nil, err
	}
	if err := os.Remove(h.poolDefPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove pool %q: %w", name, err)
	}
	rep, err := h.drain(ctx, name)
	if err == nil {
		_ = os.Remove(h.poolLockPath(name))
	}
	return rep, err
}

// errClaimRefused marks a claim error that is the request's fault (a name
// in use, a limit): the create fails with it rather than trying another
// member or a cold start.
type errClaimRefused struct{ err error }

func (e errClaimRefused) Error() string { return e.err.Error() }
func (e errClaimRefused) Unwrap() error { return e.err }

// claim takes an idle member of a pool whose key matches o (checked and
// completed by checkOptions) and img, applies what may differ, and returns
// it running. t0 is when the create started (its timings count from
// there). It returns nil, nil when no member can be had: the create
// then starts a sandbox itself.
func (h *Host) claim(ctx context.Context, o *sbx.Options, img *sbx.ImageInfo, t0 time.Time) (*sbx.Sandbox, error) {
	tc := time.Now()
	key := poolKey(o, img)
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

// claimResult turns a failed claim (errClaimFailed) into none, so that
// the create starts cold.
func claimResult(sb *sbx.Sandbox, err error) (*sbx.Sandbox, error) {
	var failed errClaimFailed
	if errors.As(err, &failed) {
		return nil, nil
	}
	return sb, err
}

// busyMemberWait bounds how long a claim waits for a pooled member's lock.
const busyMemberWait = 100 * time.Millisecond

// claimMember runs claimLocked and unlocks: the claimed sandbox, or the
// request's own refusal, or (nil, nil) to try another member.
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

// claimLocked claims the locked sandbox if it is still an idle member with
// key (nil, nil if not). On an error other than errClaimRefused the
// member is removed: it may be half set up.
func (h *Host) claimLocked(ctx context.Context, l *state.Lock, key string, o *sbx.Options, t0, tc time.Time) (*sbx.Sandbox, error) {
	var m sbx.Sandbox
	if err := l.Read(&m); err != nil {
		return nil, nil
	}
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
	sb := m
	sb.Options = *o
	sb.Name = o.Name
	sb.Pool, sb.FromPool = "", m.Pool
	now := h.now().UTC()
	sb.Created, sb.Started, sb.ExpiresAt = now, &now, nil
	if o.TTL > 0 {
		exp := now.Add(o.TTL)
		sb.ExpiresAt = &exp
	}
	// What the request may be refused for comes first, while the member
	// is untouched.
	if sb.Name != "" {
		if err := h.store.ClaimName(sb.Name, sb.ID); err != nil {
			return nil, errClaimRefused{err}
		}
	}
	release, err := h.admitClaim(ctx, &m, &sb)
	if err == nil {
		// Ports in use are the request's fault; a failed publish leaves
		// the member as it was.
		if err = h.publishClaim(ctx, &sb); err != nil {
			release()
		}
	}
	if err != nil {
		h.store.ReleaseName(sb.Name, sb.ID)
		return nil, errClaimRefused{err}
	}
	// The claim is recorded before anything of the member changes: a
	// claim killed midway leaves a record being created, which gc removes
	// with the member, never a pooled one with another claimant's mounts.
	sb.Status = sbx.StatusCreating
	err = l.Write(&sb)
	if err == nil {
		_ = os.Remove(h.pooledEntry(key, sb.ID))
		err = h.applyClaim(ctx, &m, &sb)
	}
	if err == nil {
		sb.Status = sbx.StatusRunning
		sb.CreateTimings = &sbx.CreateTimings{AdmitS: tc.Sub(t0).Seconds(), ClaimS: time.Since(tc).Seconds(), TotalS: time.Since(t0).Seconds(),
			Pool: "hit, " + m.Pool}
		err = l.Write(&sb)
	}
	release()
	if err == nil && sb.ExpiresAt != nil {
		err = h.store.SetExpiry(sb.ID, *sb.ExpiresAt)
	}
	if err != nil {
		// The member may be half set up: it goes, name and all.
		m.Name = sb.Name
		if rerr := h.destroy(context.WithoutCancel(ctx), l, &m); rerr != nil {
			h.log.Warn("remove pool member whose claim failed", "id", m.ID, "err", rerr)
		}
		return nil, fmt.Errorf("claim pool member %s: %w", m.ShortID(), err)
	}
	_ = os.Remove(h.pooledEntry(key, sb.ID))
	h.emit(changeCreated, &sb)
	h.emit(changeReady, &sb)
	h.events.askPoolRefill()
	return &sb, nil
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

// publishClaim publishes the ports the create asks for on the member's
// bridged network (members publish none).
func (h *Host) publishClaim(ctx context.Context, sb *sbx.Sandbox) error {
	if len(sb.Options.Publish) == 0 {
		return nil
	}
	na, err := parseNetwork(&sb.Options, hostname(sb))
	if err != nil {
		return err
	}
	n, err := h.network()
	if err != nil {
		return err
	}
	a, err := n.Publish(ctx, sb.ID, na.Publish)
	if err != nil {
		return fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	if sb.Network != nil {
		sb.Network.Ports = networkInfo(a).Ports
	}
	return nil
}

// applyClaim applies to the running member m what sb asks for beyond its
// key: cgroup limits, the writable layer's size, what personalise applies
// (hostname, network settings, mounts), and the environment and working
// directory of later commands.
func (h *Host) applyClaim(ctx context.Context, m, sb *sbx.Sandbox) error {
	ol, nl := m.Options.Limits, sb.Options.Limits
	if ol.MemoryBytes != nl.MemoryBytes || ol.CPUs != nl.CPUs || ol.Pids != nl.Pids {
		lim := cgroup.Limits{MemoryBytes: nl.MemoryBytes, CPUs: nl.CPUs, Pids: nl.Pids}.WithInitAllowance()
		if err := cgroup.Update(sb.ID, lim); err != nil {
			return err
		}
	}
	if ol.DiskBytes != nl.DiskBytes {
		// A remount: made in the namespace that holds the mount.
		err := h.inMountNS(sb.ID, func() error {
			return rootfs.Resize(filepath.Join(h.store.RunDir(sb.ID), rootfsDir), nl.DiskBytes)
		})
		if err != nil {
			return err
		}
	}
	if err := h.personalise(ctx, m, sb); err != nil {
		return err
	}
	oenv, owd := commandDefaults(m)
	nenv, nwd := commandDefaults(sb)
	if owd != nwd || !slices.Equal(oenv, nenv) {
		c, _ := h.executor(sb)
		defer c.Close()
		if err := c.SetDefaults(ctx, execapi.Defaults{Env: nenv, Workdir: nwd}); err != nil {
			return fmt.Errorf("set the executor's defaults: %w", err)
		}
	}
	return nil
}

// commandDefaults are the environment and working directory the executor
// gives commands of sb: the image's, with the options' on top.
func commandDefaults(sb *sbx.Sandbox) ([]string, string) {
	env, wd := sb.Options.Env, sb.Options.Workdir
	if sb.Image != nil {
		env = sbx.MergeEnv(sb.Image.Env, sb.Options.Env)
		if wd == "" {
			wd = sb.Image.Workdir
		}
	}
	if wd == "" {
		wd = "/"
	}
	return withPath(env), wd
}

// gcPools removes pool debris: members whose PID 1 died or whose pool is
// gone, and index entries of no idle member.
func (h *Host) gcPools(ctx context.Context, rep *sbx.GCReport) error {
	names, err := h.poolNames()
	if err != nil {
		return err
	}
	defined := map[string]bool{}
	for _, n := range names {
		defined[n] = true
	}
	members, err := h.poolMembers()
	if err != nil {
		return err
	}
	for pool, ms := range members {
		for _, m := range ms {
			if m.Status == sbx.StatusPooled && defined[pool] && pid1Alive(m) {
				continue
			}
			if m.Status == sbx.StatusCreating {
				continue // recover undoes it if its creator died
			}
			if h.removeMember(ctx, m.ID, pool, false) {
				rep.Pooled = append(rep.Pooled, m.ID)
			}
		}
	}
	keys, err := readDirNames(filepath.Join(h.store.Root(), pooledDir))
	if err != nil {
		return err
	}
	for _, key := range keys {
		ids, _ := readDirNames(filepath.Join(h.store.Root(), pooledDir, key))
		for _, id := range ids {
			var sb sbx.Sandbox
			if err := h.store.Read(id, &sb); errors.Is(err, state.ErrNotFound) || (err == nil && sb.Status != sbx.StatusPooled) {
				_ = os.Remove(h.pooledEntry(key, id))
			}
		}
		_ = os.Remove(filepath.Join(h.store.Root(), pooledDir, key)) // only if empty
	}
	return nil
}

// readDirNames lists a directory's entries, sorted; a missing directory
// has none.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// markPooled makes the record of a just-started member say pooled and
// lists it in the index of its key, where claims look.
func (h *Host) markPooled(l *state.Lock, sb *sbx.Sandbox) error {
	sb.Status = sbx.StatusPooled
	if err := l.Write(sb); err != nil {
		return err
	}
	entry := h.pooledEntry(poolKey(&sb.Options, sb.Image), sb.ID)
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		return fmt.Errorf("index pool member: %w", err)
	}
	if err := os.WriteFile(entry, []byte(sb.Pool), 0o600); err != nil {
		return fmt.Errorf("index pool member: %w", err)
	}
	return nil
}

// keepPools keeps every warm pool filled: at start, after each claim,
// and every poolRefillInterval (for claims by other processes), until
// Close. Fills run one at a time; a pool another process is filling is
// skipped until the next pass.
func (e *events) keepPools() {
	defer e.wg.Done()
	ctx, cancel := e.stopped()
	defer cancel()
	tick := time.NewTicker(poolRefillInterval)
	defer tick.Stop()
	failing := map[string]*poolBackoff{}
	for {
		e.h.refillPools(ctx, failing)
		select {
		case <-e.done:
			return
		case <-e.poolRefill:
		case <-tick.C:
		}
	}
}

// poolRefillInterval is how often a server looks for pools that claims of
// other processes (the CLI) emptied.
const poolRefillInterval = 2 * time.Second

// askPoolRefill wakes keepPools after a claim.
func (e *events) askPoolRefill() {
	select {
	case e.poolRefill <- struct{}{}:
	default: // a refill is already due
	}
}

// poolBackoff delays the refills of a pool whose fills fail (a limit
// reached, an image gone): the wait doubles up to poolMaxBackoff, and one
// warning is logged per failure streak.
type poolBackoff struct {
	wait time.Duration
	next time.Time
}

const poolMaxBackoff = time.Minute

// refillPools fills every pool whose fill lock is free and that is not
// backing off after failures.
func (h *Host) refillPools(ctx context.Context, failing map[string]*poolBackoff) {
	names, err := h.poolNames()
	if err != nil {
		h.log.Warn("warm pools: list", "err", err)
		return
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		b := failing[name]
		if b != nil && time.Now().Before(b.next) {
			continue
		}
		unlock, err := state.TryLockFile(h.poolLockPath(name))
		if err != nil {
			continue // another process fills it
		}
		rep, err := h.fillLocked(ctx, name)
		unlock()
		switch {
		case err == nil:
			delete(failing, name)
		case ctx.Err() != nil || errors.Is(err, sbx.ErrNotFound):
		case b == nil:
			h.log.Warn("warm pool: refill failed; retrying with backoff", "pool", name, "err", err)
			failing[name] = &poolBackoff{wait: poolRefillInterval, next: time.Now().Add(poolRefillInterval)}
		default:
			b.wait = min(2*b.wait, poolMaxBackoff)
			b.next = time.Now().Add(b.wait)
		}
		if rep != nil && len(rep.Started)+len(rep.Removed) > 0 {
			h.log.Debug("warm pool refilled", "pool", name, "started", len(rep.Started), "removed", len(rep.Removed))
		}
	}
}
