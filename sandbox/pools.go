package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/errkind"
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
// (nil for a root directory) by digest, and the main command members
// boot with its environment and working directory, if any.
func poolKey(o *sbx.Options, img *sbx.ImageInfo) string {
	k := sbx.PoolKeyValues(o)
	k["image"], k["rootfs"] = "rootfs:"+o.Rootfs, nil
	if b := bootKey(o); b != nil {
		k["boot"] = b // a main command the members boot
	}
	if img != nil {
		k["image"] = "image:" + img.Digest
	}
	data, _ := json.Marshal(k)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// unclaimableReason says why no member may serve o when o sets a field a
// claim cannot apply to a running member (sbx.PoolUnclaimable), else "".
func unclaimableReason(o *sbx.Options) string {
	set := sbx.OptionsSet(o, sbx.PoolUnclaimable, false)
	if len(set) == 0 {
		return ""
	}
	return joinNames(set) + " cannot be applied to a running member"
}

// claimIfClaimable is claimOrReason for a create whose options a claim
// can serve; one that sets an unclaimable field starts cold, saying so.
func (h *Host) claimIfClaimable(ctx context.Context, o *sbx.Options, img *sbx.ImageInfo, t0 time.Time) (*sbx.Sandbox, string, error) {
	if reason := unclaimableReason(o); reason != "" {
		return nil, reason, nil
	}
	return h.claimOrReason(ctx, o, img, t0)
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
		return nil, errkind.New(fmt.Sprintf("no pool %q (sbx pool ls lists them)", name), sbx.ErrNotFound)
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
// pull policy says); a pool that boots nothing of an image with a health
// check becomes the image's template (imageTemplate). No member starts
// yet (FillPool, or a server's background refill).
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
	if err := imageTemplate(&spec, img.config); err != nil {
		return nil, err
	}
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
			// Claimable once listed in its key's index, which its filler
			// does after the record says pooled (markPooled): until then it
			// is still starting, so that a caller who waits for a ready
			// member and then creates claims it.
			if _, err := os.Lstat(h.pooledEntry(poolKey(&m.Options, m.Image), m.ID)); err != nil {
				p.Starting++
				continue
			}
			p.Ready = append(p.Ready, m.ID)
		case sbx.StatusCreating:
			if h.memberStarting(m.ID) {
				p.Starting++
			}
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
	// An unknown pool is sbx.ErrNotFound (404), before its lock file
	// would be made.
	if _, err := h.readPoolDef(name); err != nil {
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
		if m.Status == sbx.StatusCreating {
			// No live fill of this pool starts members (its lock is held
			// here): this is the debris of a fill that died, undone here
			// as gc would, so it neither counts as starting nor waits for
			// a gc.
			if h.undoInterruptedMember(ctx, m.ID, name) {
				rep.Removed = append(rep.Removed, m.ID)
			}
			continue
		}
		if m.Status != sbx.StatusPooled {
			continue
		}
		if poolKey(&m.Options, m.Image) == key && pid1Alive(m) && h.bootedAlive(ctx, m) && ready < d.Spec.Size {
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

// undoInterruptedMember removes member id of pool if it is still being
// created but nobody holds its lock: its creator died (as recover undoes
// an interrupted create). It reports whether it did.
func (h *Host) undoInterruptedMember(ctx context.Context, id, pool string) bool {
	l, err := h.store.TryLock(id)
	if err != nil {
		return false // its creator is alive (or another operation has it)
	}
	defer l.Unlock()
	var sb sbx.Sandbox
	if err := l.Read(&sb); err != nil || sb.Pool != pool || sb.Status != sbx.StatusCreating {
		return false
	}
	if err := h.destroy(context.WithoutCancel(ctx), l, &sb); err != nil {
		h.log.Warn("undo a pool member whose fill died", "pool", pool, "id", id, "err", err)
		return false
	}
	return true
}

// memberStarting reports whether a member recorded as being created has
// a live creator: a create holds the member's lock from its first record
// to its last, so a free lock means its fill died (the next fill or gc
// removes it).
func (h *Host) memberStarting(id string) bool {
	l, err := h.store.TryLock(id)
	if err != nil {
		return true
	}
	l.Unlock()
	return false
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

// busyMemberWait bounds how long a claim waits for a pooled member's lock.
const busyMemberWait = 100 * time.Millisecond

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

// markPooled makes the record of a just-started member say pooled,
// prepares its claim's writes (state.Lock.PrepareWrites) and lists it in
// the index of its key, where claims look.
func (h *Host) markPooled(l *state.Lock, sb *sbx.Sandbox) error {
	sb.Status = sbx.StatusPooled
	if err := l.Write(sb); err != nil {
		return err
	}
	// The claim's record writes and its name fill files made now,
	// untimed, rather than new ones.
	if err := l.PrepareWrites(); err != nil {
		return err
	}
	key := poolKey(&sb.Options, sb.Image)
	h.pools.indexed(sb.Pool, key)
	entry := h.pooledEntry(key, sb.ID)
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		return fmt.Errorf("index pool member: %w", err)
	}
	if err := os.WriteFile(entry, []byte(sb.Pool), 0o600); err != nil {
		return fmt.Errorf("index pool member: %w", err)
	}
	return nil
}

const poolMaxBackoff = time.Minute
