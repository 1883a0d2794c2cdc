package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
)

// newPool defines pool name of size members with o and fills it.
func newPool(t *testing.T, h *Host, name string, size int, o sbx.Options) *sbx.Pool {
	t.Helper()
	ctx := context.Background()
	if _, err := h.CreatePool(ctx, sbx.PoolSpec{Name: name, Size: size, Options: o}); err != nil {
		t.Fatal(err)
	}
	rep, err := h.FillPool(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range rep.Started {
		markSeen(h, id)
	}
	p, err := h.GetPool(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ready) != size || len(rep.Started) != size {
		t.Fatalf("after fill: %d ready, %d started, want %d", len(p.Ready), len(rep.Started), size)
	}
	return p
}

// cgroupValue reads the cgroup file name of sandbox id from whichever
// hierarchy has it (cgroup v1, hybrid or v2).
func cgroupValue(t *testing.T, id string, names ...string) string {
	t.Helper()
	for _, dir := range cgroup.SandboxDirs(id) {
		for _, n := range names {
			if data, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
				return strings.TrimSpace(string(data))
			}
		}
	}
	t.Fatalf("no cgroup file %v for sandbox %s", names, id)
	return ""
}

func execOut(t *testing.T, h *Host, id string, argv ...string) string {
	t.Helper()
	res, err := h.Exec(context.Background(), id, sbx.ExecRequest{Argv: argv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%v: exit %d: %s%s", argv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// TestPoolClaim: a create matching a pool's key gets a member with the
// create's name, labels, TTL, env, working directory and limits really
// applied (cgroup files, tmpfs size); a create that does not match starts
// cold; members are hidden, refuse use, refill, and drain leaves nothing.
func TestPoolClaim(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	base := busybox(t)
	base.Env = []string{"POOL=1"}
	p := newPool(t, h, "web", 2, base)

	if list, _ := h.List(ctx, sbx.Filter{}); len(list) != 0 {
		t.Fatalf("ps without --pooled lists %d pool members", len(list))
	}
	members, _ := h.List(ctx, sbx.Filter{Pooled: true})
	if len(members) != 2 || members[0].Status != sbx.StatusPooled || members[0].Pool != "web" {
		t.Fatalf("pooled listing: %+v", members)
	}
	if _, err := h.Exec(ctx, members[0].ID, sbx.ExecRequest{Argv: []string{"true"}}, nil); !errors.Is(err, sbx.ErrState) {
		t.Fatalf("exec in an idle member: got %v, want sbx.ErrState", err)
	}

	o := busybox(t)
	o.Name = "claimed"
	o.Labels = map[string]string{"team": "a"}
	o.Env = []string{"FOO=bar"}
	o.Workdir = "/work/dir"
	o.TTL = time.Hour
	o.Limits = sbx.Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 50, DiskBytes: 8 << 20}
	sb, err := h.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if sb.FromPool != "web" || !slices.Contains(p.Ready, sb.ID) || sb.Status != sbx.StatusRunning || sb.Pool != "" {
		t.Fatalf("create did not claim a member of %v: %+v", p.Ready, sb)
	}
	if sb.CreateTimings == nil || sb.CreateTimings.ClaimS <= 0 {
		t.Fatalf("claim timings: %+v", sb.CreateTimings)
	}
	got, err := h.Get(ctx, "claimed")
	if err != nil || got.ID != sb.ID || got.Options.Labels["team"] != "a" || got.ExpiresAt == nil {
		t.Fatalf("get by name after claim: %+v, %v", got, err)
	}
	if list, _ := h.List(ctx, sbx.Filter{Labels: map[string]string{"team": "a"}}); len(list) != 1 {
		t.Fatalf("label filter finds %d sandboxes", len(list))
	}
	if env := execOut(t, h, sb.ID, "env"); !strings.Contains(env, "FOO=bar") || strings.Contains(env, "POOL=1") {
		t.Fatalf("env of a claimed sandbox:\n%s", env)
	}
	if wd := execOut(t, h, sb.ID, "pwd"); wd != "/work/dir" {
		t.Fatalf("working directory %q, want /work/dir", wd)
	}
	// The limits are the cgroup's, not just the record's.
	if v := cgroupValue(t, sb.ID, "memory.limit_in_bytes", "memory.max"); v != strconv.Itoa(64<<20) {
		t.Fatalf("memory limit in the cgroup: %s", v)
	}
	if v := cgroupValue(t, sb.ID, "pids.max"); v != strconv.Itoa(50+cgroup.InitPidsAllowance) {
		t.Fatalf("pids limit in the cgroup: %s", v)
	}
	if v := cgroupValue(t, sb.ID, "cpu.cfs_quota_us", "cpu.max"); !strings.HasPrefix(v, "50000") {
		t.Fatalf("CPU quota in the cgroup: %s", v)
	}
	var st unix.Statfs_t
	if err := h.inMountNS(sb.ID, func() error {
		return unix.Statfs(filepath.Join(h.store.RunDir(sb.ID), rootfsDir, "rw"), &st)
	}); err != nil {
		t.Fatal(err)
	}
	if size := int64(st.Blocks) * st.Bsize; size != 8<<20 {
		t.Fatalf("writable layer holds %d bytes, want %d", size, 8<<20)
	}
	res, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"dd", "if=/dev/zero", "of=/big", "bs=1M", "count=12"}}, nil)
	if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left") {
		t.Fatalf("writing 12 MiB to an 8 MiB disk: %+v, %v", res, err)
	}

	// Options fixed at start that differ: a cold create; the pool keeps
	// its other member.
	ro := busybox(t)
	ro.ReadonlyRootfs = true
	cold, err := h.Create(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	if cold.FromPool != "" || slices.Contains(p.Ready, cold.ID) {
		t.Fatalf("a read-only create claimed a member: %+v", cold)
	}
	if p, _ = h.GetPool(ctx, "web"); len(p.Ready) != 1 {
		t.Fatalf("after one claim: %d ready, want 1", len(p.Ready))
	}
	// A name in use fails the create and leaves the member idle.
	dup := busybox(t)
	dup.Name = "claimed"
	if _, err := h.Create(ctx, dup); !errors.Is(err, sbx.ErrNameInUse) {
		t.Fatalf("claim with a name in use: got %v", err)
	}
	if p, _ = h.GetPool(ctx, "web"); len(p.Ready) != 1 {
		t.Fatalf("after a refused claim: %d ready, want 1", len(p.Ready))
	}

	rep, err := h.FillPool(ctx, "web")
	if err != nil || len(rep.Started) != 1 {
		t.Fatalf("refill: %+v, %v", rep, err)
	}
	markSeen(h, rep.Started[0])
	rep, err = h.DrainPool(ctx, "web")
	if err != nil || len(rep.Removed) != 2 {
		t.Fatalf("drain: %+v, %v", rep, err)
	}
	if list, _ := h.List(ctx, sbx.Filter{Pooled: true}); len(list) != 2 {
		t.Fatalf("after drain %d sandboxes are left, want the claimed and the cold one", len(list))
	}
	if _, err := h.RemovePool(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.GetPool(ctx, "web"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("removed pool: got %v", err)
	}
}

// TestPoolConcurrentClaims: concurrent creates never share a member, and
// those that find the pool empty start cold.
func TestPoolConcurrentClaims(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	const size, creates = 3, 5
	for round := range 2 {
		p := newPoolOrFill(t, h, "race", size)
		var mu sync.Mutex
		var got []*sbx.Sandbox
		var wg sync.WaitGroup
		errs := make(chan error, creates)
		for range creates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, err := h.Create(ctx, busybox(t))
				if err != nil {
					errs <- err
					return
				}
				markSeen(h, sb.ID)
				mu.Lock()
				got = append(got, sb)
				mu.Unlock()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		pooled := 0
		for _, sb := range got {
			if ids[sb.ID] {
				t.Fatalf("round %d: two creates got sandbox %s", round, sb.ID)
			}
			ids[sb.ID] = true
			if sb.FromPool == "race" {
				if !slices.Contains(p.Ready, sb.ID) {
					t.Fatalf("round %d: %s claimed but not a member of %v", round, sb.ID, p.Ready)
				}
				pooled++
			}
		}
		if pooled != size {
			t.Fatalf("round %d: %d of %d creates claimed members, want %d", round, pooled, creates, size)
		}
		for _, sb := range got {
			if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// newPoolOrFill defines the pool on the first call and refills it after.
func newPoolOrFill(t *testing.T, h *Host, name string, size int) *sbx.Pool {
	t.Helper()
	if _, err := h.GetPool(context.Background(), name); err != nil {
		return newPool(t, h, name, size, busybox(t))
	}
	rep, err := h.FillPool(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range rep.Started {
		markSeen(h, id)
	}
	p, _ := h.GetPool(context.Background(), name)
	return p
}

// TestPoolGC: a member whose PID 1 died is skipped by claims and removed
// by gc, and so are the members of a pool whose definition is gone.
func TestPoolGC(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	p := newPool(t, h, "gc", 2, busybox(t))
	var dead sbx.Sandbox
	if err := h.store.Read(p.Ready[0], &dead); err != nil {
		t.Fatal(err)
	}
	ctr, err := h.container(&dead)
	if err != nil {
		t.Fatal(err)
	}
	if err := killAndWait(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	rep, err := h.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Pooled, []string{dead.ID}) {
		t.Fatalf("gc removed pool members %v, want the dead one %s", rep.Pooled, dead.ID)
	}
	// A second Host on the same root (another process: the CLI) sees the
	// pool and claims from it.
	other, err := Open(HostConfig{Root: h.cfg.Root, RunRoot: h.cfg.RunRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sb, err := other.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != p.Ready[1] {
		t.Fatalf("second host claimed %s (from pool %q), want %s", sb.ID, sb.FromPool, p.Ready[1])
	}
	if _, err := h.FillPool(ctx, "gc"); err != nil {
		t.Fatal(err)
	}
	members, _ := h.List(ctx, sbx.Filter{Status: sbx.StatusPooled})
	if len(members) != 2 {
		t.Fatalf("after refill: %d members", len(members))
	}
	for _, m := range members {
		markSeen(h, m.ID)
	}
	// The definition removed by hand (a crashed pool rm): gc removes the
	// members and the index.
	if err := os.Remove(h.poolDefPath("gc")); err != nil {
		t.Fatal(err)
	}
	rep, err = h.GC(ctx)
	if err != nil || len(rep.Pooled) != 2 {
		t.Fatalf("gc after the pool went: %+v, %v", rep, err)
	}
	if names, _ := readDirNames(filepath.Join(h.store.Root(), pooledDir)); len(names) != 0 {
		t.Fatalf("pool index left behind: %v", names)
	}
}

// TestPoolBackgroundRefill: a host's background work refills a pool after
// a claim, and removes the spare files the claim used or left.
func TestPoolBackgroundRefill(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	if _, err := h.CreatePool(ctx, sbx.PoolSpec{Name: "bg", Size: 1, Options: busybox(t)}); err != nil {
		t.Fatal(err)
	}
	if err := h.StartBackground(ctx); err != nil {
		t.Fatal(err)
	}
	waitReady := func() string {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if p, err := h.GetPool(ctx, "bg"); err == nil && len(p.Ready) == 1 {
				markSeen(h, p.Ready[0])
				return p.Ready[0]
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("the pool was not filled in the background within 60 s")
		return ""
	}
	first := waitReady()
	sb, err := h.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != first {
		t.Fatalf("create did not claim the member %s", first)
	}
	if second := waitReady(); second == first {
		t.Fatal("refilled with the claimed sandbox")
	}
	// The watcher removes the spare files the claim used or left.
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := filepath.Glob(filepath.Join(h.store.Dir(sb.ID), "*.spare*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claimed sandbox's spare files are left 30 s after its claim: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPoolKey: the key ignores what a claim applies and how an empty list
// is spelled, and changes with what is fixed at start.
func TestPoolKey(t *testing.T) {
	img := &sbx.ImageInfo{Digest: "sha256:aa"}
	a := sbx.Options{Image: "x", Volumes: []sbx.Volume{}, CapAdd: []string{}}
	b := sbx.Options{Image: "x", Name: "n", Env: []string{"A=1"}, Workdir: "/w", User: "1000", TTL: time.Hour,
		Limits: sbx.Limits{MemoryBytes: 1 << 30}, Labels: map[string]string{"k": "v"}, Seccomp: "default",
		Hostname: "h", DNS: []string{"192.0.2.1"}, Egress: "none", AllowHostPorts: []string{"80"},
		Volumes: []sbx.Volume{{HostPath: "/a", Path: "/a"}}, Tmpfs: []sbx.Tmpfs{{Path: "/t"}}}
	if poolKey(&a, img) != poolKey(&b, img) {
		t.Fatal("what a claim applies changed the key")
	}
	for name, o := range map[string]sbx.Options{
		"read-only": {Image: "x", ReadonlyRootfs: true},
		"network":   {Image: "x", Network: sbx.NetworkBridge},
		"seccomp":   {Image: "x", Seccomp: "unconfined"},
		"cap":       {Image: "x", CapDrop: []string{"ALL"}},
		"userns":    {Image: "x", UserNS: sbx.UserNSHost},
	} {
		if poolKey(&o, img) == poolKey(&a, img) {
			t.Errorf("%s does not change the key", name)
		}
	}
	if poolKey(&a, &sbx.ImageInfo{Digest: "sha256:bb"}) == poolKey(&a, img) {
		t.Error("the image digest does not change the key")
	}
}

// BenchmarkPoolClaim measures a create that claims a pool member, against
// BenchmarkPoolCold in the same run: go test -run '^$' -bench 'Pool'
// ./sandbox/. The refill after each claim is not timed. The state root is
// on the test's temporary directory (disk), or on tmpfs (/dev/shm): a
// claim's record write waits for the file system's journal when it is
// busy.
func BenchmarkPoolClaim(b *testing.B) {
	for _, fs := range []string{"disk", "tmpfs"} {
		b.Run(fs, func(b *testing.B) {
			var cfg HostConfig
			if fs == "tmpfs" {
				dir, err := os.MkdirTemp("/dev/shm", "sbx-pool-bench-")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { os.RemoveAll(dir) })
				cfg.Root = dir
			}
			benchmarkClaim(b, newHost(b, cfg))
		})
	}
}

func benchmarkClaim(b *testing.B, h *Host) {
	ctx := context.Background()
	o := busybox(b)
	if _, err := h.CreatePool(ctx, sbx.PoolSpec{Name: "bench", Size: 2, Options: o}); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		rep, err := h.FillPool(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range rep.Started {
			markSeen(h, id)
		}
		o.Env = []string{"N=" + strconv.Itoa(i)}
		b.StartTimer()
		sb, err := h.Create(ctx, o)
		b.StopTimer()
		if err != nil || sb.FromPool != "bench" {
			b.Fatalf("claim: %v (from %q)", err, sb.FromPool)
		}
		if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkPoolCold is the cold create BenchmarkPoolClaim is compared
// with.
func BenchmarkPoolCold(b *testing.B) {
	h := newHost(b, HostConfig{})
	ctx := context.Background()
	for b.Loop() {
		sb, err := h.Create(ctx, busybox(b))
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		markSeen(h, sb.ID)
		if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestPoolFillKilled: a fill killed while it starts a member leaves a
// creating record, not counted as starting (its creator is gone), that gc
// undoes; the next fill starts afresh.
func TestPoolFillKilled(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	crashed := killedFill(t, h)
	rep, err := h.GC(ctx)
	if err != nil || !slices.Equal(rep.Interrupted, []string{crashed}) {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	fill, err := h.FillPool(ctx, "crash")
	if err != nil || len(fill.Started) != 1 {
		t.Fatalf("fill after gc: %+v, %v", fill, err)
	}
	markSeen(h, fill.Started[0])
}

// TestPoolFillAfterKilledFill: the next fill after a killed one, without a
// gc, undoes the member the killed fill left starting (it held the pool's
// lock, so no live fill is starting it) and fills the pool; nothing of the
// killed member is left.
func TestPoolFillAfterKilledFill(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	crashed := killedFill(t, h)
	fill, err := h.FillPool(ctx, "crash")
	if err != nil || !slices.Equal(fill.Removed, []string{crashed}) || len(fill.Started) != 1 {
		t.Fatalf("fill after a killed fill: %+v, %v", fill, err)
	}
	markSeen(h, fill.Started[0])
	if p, _ := h.GetPool(ctx, "crash"); p.Starting != 0 || !slices.Equal(p.Ready, fill.Started) {
		t.Fatalf("pool after the fill: %+v", p)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	_, recErr := os.Stat(h.store.Dir(crashed))
	_, runErr := os.Stat(h.store.RunDir(crashed))
	if strings.Contains(string(mi), crashed) || !os.IsNotExist(recErr) || !os.IsNotExist(runErr) || len(cgroup.Leftovers()[crashed]) > 0 {
		t.Fatalf("the killed fill's member %s left mounts, directories (%v, %v) or cgroups", crashed, recErr, runErr)
	}
	if rep, err := h.GC(ctx); err != nil || len(rep.Interrupted) != 0 {
		t.Fatalf("gc after the fill found more: %+v, %v", rep, err)
	}
}

// killedFill defines pool "crash" of one member and runs a fill in a
// helper process killed while it starts the member; it returns the
// member's id, which is left creating and not counted as starting.
func killedFill(t *testing.T, h *Host) string {
	t.Helper()
	ctx := context.Background()
	if _, err := h.CreatePool(ctx, sbx.PoolSpec{Name: "crash", Size: 1, Options: busybox(t)}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SBX_HELPER_FILL=1", "SBX_TEST_CRASH_AT="+stepReady,
		"SBX_ROOT="+h.cfg.Root, "SBX_RUN_ROOT="+h.cfg.RunRoot)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("helper was not killed: %v\n%s", err, out)
	}
	list, _ := h.List(ctx, sbx.Filter{Pooled: true})
	if len(list) != 1 || list[0].Status != sbx.StatusCreating || list[0].Pool != "crash" {
		t.Fatalf("after the crash: %+v", list)
	}
	markSeen(h, list[0].ID)
	if p, _ := h.GetPool(ctx, "crash"); p.Starting != 0 || len(p.Ready) != 0 {
		t.Fatalf("pool after the crash counts a member of a dead fill: %+v", p)
	}
	return list[0].ID
}

// helperFill is this test binary re-run by TestPoolFillKilled (see
// TestMain): it fills the pool and is killed at the crash point.
func helperFill() {
	h, err := Open(HostConfig{Root: os.Getenv("SBX_ROOT"), RunRoot: os.Getenv("SBX_RUN_ROOT")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper fill: open:", err)
		os.Exit(1)
	}
	_, err = h.FillPool(context.Background(), "crash")
	fmt.Fprintf(os.Stderr, "fill returned (%v) instead of being killed\n", err)
	os.Exit(1)
}

// TestPoolReadyMeansClaimable: a member counts as ready only once it is
// listed where claims look; its filler lists it after its record says
// pooled, and a caller that waits for a ready member and then creates
// must claim it, not start cold.
func TestPoolReadyMeansClaimable(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	p := newPool(t, h, "listed", 1, busybox(t))
	id := p.Ready[0]
	entry := h.pooledEntry(p.Key, id)
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(entry); err != nil { // as between the record's write and the listing
		t.Fatal(err)
	}
	if got, err := h.GetPool(ctx, "listed"); err != nil || len(got.Ready) != 0 || got.Starting != 1 {
		t.Fatalf("a pooled member not listed yet: ready %v, starting %d (%v); want none ready, one starting", got.Ready, got.Starting, err)
	}
	if err := os.WriteFile(entry, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := h.GetPool(ctx, "listed"); err != nil || len(got.Ready) != 1 || got.Ready[0] != id {
		t.Fatalf("a listed member: ready %v (%v), want [%s]", got.Ready, err, id)
	}
}
