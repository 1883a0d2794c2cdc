package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

func requireRoot(t testing.TB) {
	t.Helper()
	roottest.Require(t, "it mounts overlays and creates cgroups")
}

func newHost(t testing.TB, cfg HostConfig) *Host {
	t.Helper()
	requireRoot(t)
	dir := shortTempDir(t)
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if cfg.Root == "" {
		cfg.Root = filepath.Join(dir, "root")
	}
	if cfg.RunRoot == "" {
		cfg.RunRoot = filepath.Join(dir, "run")
	}
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seenMu.Lock()
	seen[m] = map[string]bool{}
	seenMu.Unlock()
	m.onAdmit = func(id string) { markSeen(m, id) }
	t.Cleanup(func() {
		ctx := context.Background()
		pools, _ := m.ListPools(ctx)
		for _, p := range pools {
			if _, err := m.RemovePool(ctx, p.Name); err != nil {
				t.Errorf("cleanup: remove pool %s: %v", p.Name, err)
			}
		}
		list, _ := m.List(ctx, sbx.Filter{Pooled: true})
		for _, sb := range list {
			if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Errorf("cleanup: remove %s: %v", sb.ID, err)
			}
		}
		if _, err := m.GC(ctx); err != nil {
			t.Errorf("cleanup: gc: %v", err)
		}
		_ = m.Close()
		assertNoLeaks(t, m)
	})
	return m
}

// seen records the ids each test Host created, so that leak checks
// look only at their own sandboxes' cgroups.
var (
	seenMu sync.Mutex
	seen   = map[*Host]map[string]bool{}
)

func markSeen(m *Host, id string) {
	seenMu.Lock()
	defer seenMu.Unlock()
	if seen[m] != nil {
		seen[m][id] = true
	}
}

// assertNoLeaks fails if anything of the Host's sandboxes is left on the
// host: mounts, cgroups, runtime or persistent directories, names.
func assertNoLeaks(t testing.TB, m *Host) {
	t.Helper()
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, m.store.RunRoot()) {
			t.Errorf("leaked mount: %s", line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if strings.Contains(string(data), m.store.RunRoot()) {
			comm, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			self, _ := os.Readlink("/proc/self")
			t.Errorf("process %s (%q, self=%s) sees a mount of the run root", p, comm, self)
		}
	}
	ids, _ := m.store.IDs()
	if len(ids) > 0 {
		t.Errorf("leaked sandbox records: %v", ids)
	}
	runDirs, _ := m.store.RunDirs()
	if len(runDirs) > 0 {
		t.Errorf("leaked runtime directories: %v", runDirs)
	}
	if pins, _ := readDirNames(filepath.Join(m.store.RunRoot(), mountNSDir)); len(pins) > 0 {
		t.Errorf("leaked mount namespace pins: %v", pins)
	}
	// Sandboxes created by helper processes are known from their records.
	for _, id := range ids {
		markSeen(m, id)
	}
	seenMu.Lock()
	mine := seen[m]
	seenMu.Unlock()
	for id := range cgroup.Leftovers() {
		if mine[id] {
			if _, err := os.Stat(m.store.Dir(id)); err != nil {
				t.Errorf("leaked cgroup of sandbox %s", id)
			}
		}
	}
	names, _ := m.store.Names()
	if len(names) > 0 {
		t.Errorf("leaked names: %v", names)
	}
}

// shortTempDir is a temporary directory with a short path: socket paths
// below it must fit in 108 bytes.
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "sbx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func busybox(t testing.TB) sbx.Options {
	return sbx.Options{Rootfs: fixture.BusyboxRootfs(t)}
}

func TestCreateStopStartRemove(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	opts := busybox(t)
	opts.Name = "lc-basic"
	opts.Labels = map[string]string{"team": "a"}
	opts.Limits = sbx.Limits{MemoryBytes: 64 << 20, Pids: 64, DiskBytes: 16 << 20}
	sb, err := m.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != sbx.StatusRunning || sb.Pid <= 0 || sb.Socket == "" {
		t.Fatalf("after create: %+v", sb)
	}
	if err := m.waitReady(ctx, sb.Socket); err != nil {
		t.Fatalf("executor not answering after create: %v", err)
	}
	if len(cgroup.Leftovers()[sb.ID]) == 0 {
		t.Fatal("no cgroup for the sandbox")
	}
	for _, ref := range []string{sb.ID, sb.ID[:8], "lc-basic"} {
		got, err := m.Get(ctx, ref)
		if err != nil || got.ID != sb.ID {
			t.Fatalf("Get(%q) = %v, %v", ref, got, err)
		}
	}
	if list, _ := m.List(ctx, sbx.Filter{Labels: map[string]string{"team": "b"}}); len(list) != 0 {
		t.Fatalf("label filter team=b matched %d", len(list))
	}
	if list, _ := m.List(ctx, sbx.Filter{Labels: map[string]string{"team": "a"}}); len(list) != 1 {
		t.Fatalf("label filter team=a matched %d", len(list))
	}
	if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: false}); !errors.Is(err, sbx.ErrState) {
		t.Fatalf("remove of a running sandbox without force: got %v, want sbx.ErrState", err)
	}
	if _, err := m.Create(ctx, opts); !errors.Is(err, sbx.ErrNameInUse) {
		t.Fatalf("second create with the same name: got %v, want sbx.ErrNameInUse", err)
	}

	st, err := m.Stop(ctx, "lc-basic", sbx.StopOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != sbx.StatusStopped {
		t.Fatalf("after stop: %s", st.Status)
	}
	if err := m.inMountNS(sb.ID, func() error {
		_, err := os.Stat(filepath.Join(sb.RootPath, "bin/busybox"))
		return err
	}); err != nil {
		t.Fatalf("root not kept after stop: %v", err)
	}
	st, err = m.Start(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != sbx.StatusRunning || st.Pid == sb.Pid {
		t.Fatalf("after start: status %s pid %d (old %d)", st.Status, st.Pid, sb.Pid)
	}
	if err := m.waitReady(ctx, st.Socket); err != nil {
		t.Fatalf("executor not answering after restart: %v", err)
	}
	if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, sb.ID); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("get after remove: %v", err)
	}
	assertNoLeaks(t, m)
}

func TestPauseResume(t *testing.T) {
	m := newHost(t, HostConfig{})
	_, sub := m.events.bus.subscribe(m.events.bus.last(), false)
	defer m.events.bus.unsubscribe(sub)
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	if sb, err = m.Pause(ctx, sb.ID); err != nil || sb.Status != sbx.StatusPaused {
		t.Fatalf("pause: %v %v", sb, err)
	}
	// A frozen executor cannot answer.
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = m.waitReady(qctx, sb.Socket)
	cancel()
	if err == nil {
		t.Fatal("a paused executor answered")
	}
	if _, err := m.Stats(ctx, sb.ID); err != nil {
		t.Fatalf("stats of a paused sandbox: %v", err)
	}
	if sb, err = m.Resume(ctx, sb.ID); err != nil || sb.Status != sbx.StatusRunning {
		t.Fatalf("resume: %v %v", sb, err)
	}
	if err := m.waitReady(ctx, sb.Socket); err != nil {
		t.Fatalf("executor after resume: %v", err)
	}
	if _, err := m.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// Removing a paused sandbox must thaw and kill it.
	if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, m)
	var events []string
	for len(sub.ch) > 0 {
		events = append(events, strings.TrimPrefix((<-sub.ch).Type, "sandbox."))
	}
	got := strings.Join(events, ",")
	if want := "created,ready,paused,resumed,paused,removed"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}

func TestBadOptionsChangeNothing(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	root := fixture.BusyboxRootfs(t)
	for name, o := range map[string]sbx.Options{
		"no root":        {},
		"both":           {Rootfs: root, Image: "x"},
		"relative root":  {Rootfs: "rel"},
		"missing root":   {Rootfs: "/nonexistent-sbx"},
		"bad name":       {Rootfs: root, Name: "../x"},
		"tiny memory":    {Rootfs: root, Limits: sbx.Limits{MemoryBytes: 1000}},
		"bad net":        {Rootfs: root, Network: "bridge0"},
		"bad env":        {Rootfs: root, Env: []string{"NOEQUALS"}},
		"bad volume":     {Rootfs: root, Volumes: []sbx.Volume{{HostPath: "rel", Path: "/x"}}},
		"reserved mount": {Rootfs: root, Tmpfs: []sbx.Tmpfs{{Path: "/.sbx/run"}}},
		"no image store": {Image: "busybox"},
	} {
		if _, err := m.Create(ctx, o); err == nil {
			t.Errorf("%s: create succeeded", name)
		} else if !errors.Is(err, sbx.ErrInvalid) && !errors.Is(err, os.ErrNotExist) {
			t.Logf("%s: %v", name, err)
		}
	}
	assertNoLeaks(t, m)
}

func TestLimits(t *testing.T) {
	m := newHost(t, HostConfig{MaxSandboxes: 1})
	ctx := context.Background()
	if _, err := m.Create(ctx, busybox(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, busybox(t)); !errors.Is(err, sbx.ErrLimit) {
		t.Fatalf("second create over MaxSandboxes=1: got %v, want sbx.ErrLimit", err)
	}

	// The budget becomes the limit of the parent cgroup that every
	// sandbox of the host shares: far above this machine's memory.
	keepParentMemory(t)
	b := newHost(t, HostConfig{MemoryBudget: 1 << 40})
	o := busybox(t)
	if _, err := b.Create(ctx, o); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("create without memory limit under a budget: got %v, want sbx.ErrInvalid", err)
	}
	o.Limits.MemoryBytes = 600 << 30
	if _, err := b.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, o); !errors.Is(err, sbx.ErrLimit) {
		t.Fatalf("create over the memory budget: got %v, want sbx.ErrLimit", err)
	}
	o.Limits.MemoryBytes = 400 << 30
	if _, err := b.Create(ctx, o); err != nil {
		t.Fatalf("create within the budget: %v", err)
	}
}

func TestTTLExpiresWithoutDaemon(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.TTL = 500 * time.Millisecond
	o.Name = "short-lived"
	sb, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(sb.ExpiresAt.Add(50 * time.Millisecond)))
	// Any operation reaps: here a listing, as `sbx ls` would.
	list, err := m.List(ctx, sbx.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("after expiry the list holds %d sandboxes", len(list))
	}
	if _, err := os.Stat(m.store.RunDir(sb.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expired sandbox's runtime directory still exists: %v", err)
	}
	if _, err := m.Resolve("short-lived"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("name of the expired sandbox still resolves: %v", err)
	}
}

// TestLeaseRunsFromTheCreatesEnd: an owner lease starts when the create
// ends, since its owner can renew only then: a create whose set-up took
// longer than the lease (here 10 s of the host's clock) returns a
// sandbox that is there, renewable, with a deadline a lease after its
// start; a TTL still counts from the creation.
func TestLeaseRunsFromTheCreatesEnd(t *testing.T) {
	m := newHost(t, HostConfig{})
	var (
		mu   sync.Mutex
		skew time.Duration
	)
	m.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) }
	admitted := m.onAdmit
	m.onAdmit = func(id string) {
		admitted(id)
		mu.Lock()
		skew += 10 * time.Second // the set-up after admission takes 10 s
		mu.Unlock()
	}
	ctx := context.Background()
	o := busybox(t)
	o.Lease = 5 * time.Second
	o.TTL = time.Hour
	sb, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if sb.ExpiresAt == nil || sb.Started == nil || sb.ExpiresAt.Before(sb.Started.Add(o.Lease)) {
		t.Fatalf("a create that outlasted its lease: expires %v, started %v; want a lease (%s) after the start", sb.ExpiresAt, sb.Started, o.Lease)
	}
	if got, err := m.Get(ctx, sb.ID); err != nil || got.Status != sbx.StatusRunning {
		t.Fatalf("the sandbox after its create: %v, %v; want it running (its lease just started)", got, err)
	}
	if _, err := m.Renew(ctx, sb.ID); err != nil {
		t.Fatalf("renew after the create: %v", err)
	}
	// A TTL shorter than the set-up has run out at the create's end.
	o = busybox(t)
	o.Lease, o.TTL = 5*time.Second, 8*time.Second
	short, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := short.Created.Add(o.TTL); short.ExpiresAt == nil || !short.ExpiresAt.Equal(want) {
		t.Fatalf("lease and TTL: expires %v, want the TTL's end %v", short.ExpiresAt, want)
	}
	if _, err := m.Get(ctx, short.ID); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("the sandbox whose TTL ended during its create: %v, want sbx.ErrNotFound", err)
	}
}

// WatchExpiry removes a sandbox when its TTL passes, without any other
// call, and returns once no deadline is left.
func TestWatchExpiry(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.TTL = 300 * time.Millisecond
	sb, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.WatchExpiry(ctx, true) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchExpiry did not return after the only deadline passed")
	}
	if _, err := os.Stat(m.store.RunDir(sb.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expired sandbox still has its runtime directory: %v", err)
	}
	if time.Now().Before(*sb.ExpiresAt) {
		t.Fatal("removed before its deadline")
	}
}

// A create killed with SIGKILL at each of its steps leaves a record from
// which GC releases everything.
func TestCreateKilledAtEachStep(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	for _, step := range CreateSteps {
		t.Run(step, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCreate$")
			cmd.Env = append(os.Environ(), "SBX_HELPER_CREATE=1", "SBX_TEST_CRASH_AT="+step,
				"SBX_ROOT="+m.cfg.Root, "SBX_RUN_ROOT="+m.cfg.RunRoot)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != -1 {
				t.Fatalf("helper was not killed at %s: %v\n%s", step, err, out)
			}
			list, _ := m.List(ctx, sbx.Filter{})
			if len(list) != 1 || list[0].Status != sbx.StatusCreating {
				t.Fatalf("after a crash at %s: want one creating sandbox, got %d", step, len(list))
			}
			markSeen(m, list[0].ID)
			rep, err := m.GC(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Interrupted) != 1 {
				t.Fatalf("gc report %+v: want one interrupted create", rep)
			}
			assertNoLeaks(t, m)
		})
	}
}

func TestHelperCreate(t *testing.T) {
	if os.Getenv("SBX_HELPER_CREATE") != "1" {
		t.Skip("helper process for TestCreateKilledAtEachStep")
	}
	m, err := Open(HostConfig{Root: os.Getenv("SBX_ROOT"), RunRoot: os.Getenv("SBX_RUN_ROOT")})
	if err != nil {
		t.Fatal(err)
	}
	o := busybox(t)
	o.Name = "crashy"
	o.TTL = time.Hour
	_, err = m.Create(context.Background(), o)
	t.Fatalf("create returned (%v) instead of being killed", err)
}

func TestRecoverMarksDeadSandboxStopped(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := m.container(sb)
	if err != nil {
		t.Fatal(err)
	}
	if err := killAndWait(ctx, ctr); err != nil {
		t.Fatal(err)
	}
	live, err := m.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 0 {
		t.Fatalf("recover reports %d live sandboxes, want 0", len(live))
	}
	got, _ := m.Get(ctx, sb.ID)
	if got.Status != sbx.StatusStopped {
		t.Fatalf("status after recover: %s", got.Status)
	}
}
