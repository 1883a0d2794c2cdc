package sandbox

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/executor/api"
)

// waitGone waits (bounded) until pid no longer runs.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, ok := procStart(pid); !ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d still runs 5s after SIGKILL", pid)
}

// A sandbox whose PID 1 was killed from outside shows as stopped to Get
// and List, without any locked operation first, and the record is
// updated; Exec and copies say so instead of failing to connect.
func TestDeadPid1ShowsStopped(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	if sb.PidStart == 0 {
		t.Fatal("the record has no start time for PID 1")
	}
	if got, _ := m.Get(ctx, sb.ID); got.Status != sbx.StatusRunning {
		t.Fatalf("live sandbox: %s", got.Status)
	}
	if err := unix.Kill(sb.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sb.Pid)
	got, err := m.Get(ctx, sb.ID)
	if err != nil || got.Status != sbx.StatusStopped || got.Pid != 0 {
		t.Fatalf("Get after kill -9 of PID 1: %+v, %v; want stopped", got, err)
	}
	var rec sbx.Sandbox
	if err := m.store.Read(sb.ID, &rec); err != nil || rec.Status != sbx.StatusStopped {
		t.Fatalf("record after Get: %s, %v; want stopped persisted", rec.Status, err)
	}
	list, err := m.List(ctx, sbx.Filter{})
	if err != nil || len(list) != 1 || list[0].Status != sbx.StatusStopped {
		t.Fatalf("List after kill: %v, %v", list, err)
	}
	const want = "is stopped: its PID 1 exited; sbx start or sbx rm it"
	_, err = m.Exec(ctx, sb.ID, api.ExecRequest{Argv: []string{"true"}}, nil)
	if !errors.Is(err, sbx.ErrState) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Exec on a dead sandbox: %v; want sbx.ErrState %q", err, want)
	}
	err = m.CopyFrom(ctx, sb.ID, "/etc/hostname", t.TempDir())
	if !errors.Is(err, sbx.ErrState) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CopyFrom on a dead sandbox: %v; want sbx.ErrState %q", err, want)
	}
	_, err = m.Attach(ctx, sb.ID, sbx.AttachOptions{ExecRequest: sbx.ExecRequest{Argv: []string{"true"}}})
	if !errors.Is(err, sbx.ErrState) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Attach on a dead sandbox: %v; want sbx.ErrState %q", err, want)
	}
	// It starts again like any stopped sandbox.
	if st, err := m.Start(ctx, sb.ID); err != nil || st.Status != sbx.StatusRunning {
		t.Fatalf("start after the kill: %v, %v", st, err)
	}
}

// A live process with another start time (a reused PID) is not PID 1.
func TestPidReuseIsNotAlive(t *testing.T) {
	start, ok := procStart(os.Getpid())
	if !ok || start == 0 {
		t.Fatalf("procStart of this process: %d, %v", start, ok)
	}
	if !pid1Alive(&sbx.Sandbox{Pid: os.Getpid(), PidStart: start}) {
		t.Fatal("this process is not alive by its own start time")
	}
	if pid1Alive(&sbx.Sandbox{Pid: os.Getpid(), PidStart: start + 1}) {
		t.Fatal("a process with another start time is taken for PID 1")
	}
	if pid1Alive(&sbx.Sandbox{Pid: 0}) {
		t.Fatal("pid 0 is alive")
	}
}

// keepParentMemory restores the parent cgroup's memory limit after a test
// that changes it. Tests set limits far above the machine's memory, so
// sandboxes of other tests running meanwhile are not held back.
func keepParentMemory(t *testing.T) {
	t.Helper()
	old, err := cgroup.ParentMemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cgroup.SetParentMemory(old); err != nil {
			t.Errorf("restore the parent cgroup's memory limit: %v", err)
		}
	})
}

// The parent cgroup's memory limit bounds the sum of --memory like a
// configured budget does, and a configured budget is applied to the parent.
func TestParentCgroupMemoryBudget(t *testing.T) {
	requireRoot(t)
	keepParentMemory(t)
	ctx := context.Background()
	const tib = int64(1) << 40
	if err := cgroup.SetParentMemory(tib); err != nil {
		t.Fatal(err)
	}
	m := newHost(t, HostConfig{})
	o := busybox(t)
	o.Limits.MemoryBytes = 600 << 30
	if _, err := m.Create(ctx, o); err != nil {
		t.Fatalf("create within the parent's limit: %v", err)
	}
	_, err := m.Create(ctx, o)
	if !errors.Is(err, sbx.ErrLimit) || !strings.Contains(err.Error(), "parent cgroup") {
		t.Fatalf("create over the parent cgroup's limit: %v; want sbx.ErrLimit naming the parent cgroup", err)
	}
	if list, _ := m.List(ctx, sbx.Filter{}); len(list) != 1 {
		t.Fatalf("the refused create left %d sandboxes", len(list))
	}

	b := newHost(t, HostConfig{MemoryBudget: 2 * tib})
	o.Limits.MemoryBytes = 100 << 30
	if _, err := b.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got, err := cgroup.ParentMemoryLimit(); err != nil || got != 2*tib {
		t.Fatalf("parent limit with a budget of %d: %d, %v", 2*tib, got, err)
	}
}

// Stop sends SIGTERM and, when PID 1 is still there after the timeout,
// SIGKILL. The executor waits 5s for commands that ignore SIGTERM, so
// after a 1s stop only SIGKILL can have ended it.
func TestStopFallsBackToSIGKILL(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once bool
		_, err := m.Exec(ctx, sb.ID, api.ExecRequest{Argv: []string{"sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`}}, func(f api.ExecFrame) error {
			if !once && strings.Contains(f.Data, "ready") {
				once = true
				close(ready)
			}
			return nil
		})
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the TERM-ignoring command ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the TERM-ignoring command never started")
	}
	pids, _ := cgroup.Pids(sb.ID)
	st, err := m.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != sbx.StatusStopped {
		t.Fatalf("after stop: %s", st.Status)
	}
	for _, pid := range append(pids, sb.Pid) {
		if _, ok := procStart(pid); ok {
			t.Errorf("pid %d still runs when Stop returned: no SIGKILL after the timeout", pid)
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the exec never ended after the stop")
	}
}

// After an OOM kill, stats report it and a peak memory near the limit.
func TestStatsAfterOOM(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.Limits.MemoryBytes = 32 << 20
	sb, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.Stats(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if before.OOMKills != 0 {
		t.Fatalf("OOM kills before any hog: %d", before.OOMKills)
	}
	res, err := m.Exec(ctx, sb.ID, api.ExecRequest{Argv: []string{"awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Signal != "SIGKILL" {
		t.Fatalf("memory hog ended with %+v, want SIGKILL", res)
	}
	u, err := m.Stats(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.OOMKills < 1 {
		t.Fatalf("stats after an OOM kill: oom_kills %d", u.OOMKills)
	}
	if u.MemoryPeakBytes < 24<<20 || u.MemoryPeakBytes > 32<<20 {
		t.Fatalf("peak memory %d after a hog under a 32 MiB limit; want close to the limit", u.MemoryPeakBytes)
	}
	if u.MemoryPeakBytes < before.MemoryPeakBytes {
		t.Fatalf("peak memory fell: %d -> %d", before.MemoryPeakBytes, u.MemoryPeakBytes)
	}
	// Remove reads the count one last time from the one file (not the
	// whole statistics), and leaves no cgroup directory behind.
	if n, err := cgroup.OOMKills(sb.ID); err != nil || n != u.OOMKills {
		t.Fatalf("cgroup.OOMKills = %d, %v; stats say %d", n, err, u.OOMKills)
	}
	if dirs := cgroup.SandboxLeftovers(sb.ID); len(dirs) < 1 {
		t.Fatalf("a running sandbox has no cgroup directories: %v", dirs)
	}
	if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, oom := m.events.tracker.counts(); oom < 1 {
		t.Fatalf("OOM kills counted by the host after remove: %d, want at least 1", oom)
	}
	if dirs := cgroup.SandboxLeftovers(sb.ID); len(dirs) != 0 {
		t.Fatalf("cgroup directories left after remove: %v", dirs)
	}
	if n, err := cgroup.OOMKills(sb.ID); err == nil {
		t.Fatalf("cgroup.OOMKills of a removed sandbox = %d, want an error", n)
	}
}

// A second Host on the same state (a restarted server) re-adopts a
// running sandbox: Recover lists it, and exec, stats and remove work.
func TestRecoverReadoptsRunningSandbox(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Open(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	live, err := m2.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].ID != sb.ID || live[0].Status != sbx.StatusRunning {
		t.Fatalf("Recover on a second Host: %v; want the running sandbox", live)
	}
	res, err := m2.Exec(ctx, sb.ID, api.ExecRequest{Argv: []string{"echo", "adopted"}}, nil)
	if err != nil || res.Stdout != "adopted\n" {
		t.Fatalf("exec through the second Host: %+v, %v", res, err)
	}
	if _, err := m2.Stats(ctx, sb.ID); err != nil {
		t.Fatalf("stats through the second Host: %v", err)
	}
	if err := m2.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, sb.ID); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("the first Host still sees the sandbox: %v", err)
	}
}
