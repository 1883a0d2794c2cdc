package snapshots

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
	"golang.org/x/sys/unix"
)

// waitIdle polls get (bounded) until the sandbox it reads was checkpointed
// by its idle timeout, and returns that record.
func waitIdle(t *testing.T, what string, within time.Duration, get func() sbx.Sandbox) sbx.Sandbox {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb := get()
		if sb.Status == sbx.StatusStopped && sb.Idle {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not checkpointed for idleness within %s: status %s, idle %v", what, within, sb.Status, sb.Idle)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// assertAsleep checks that an idle-checkpointed sandbox holds no memory:
// its processes and cgroups are gone, its checkpoint is on disk.
func assertAsleep(t *testing.T, root string, sb sbx.Sandbox, pid int) {
	t.Helper()
	if paths := cgroup.Leftovers()[sb.ID]; len(paths) > 0 {
		t.Errorf("idle sandbox %s keeps its cgroups: %v", sb.ID, paths)
	}
	// Gone, or a zombie its reaper has not collected yet (Z), or one it is
	// collecting (X): its memory is freed either way.
	if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			t.Errorf("idle sandbox %s: its PID 1 (%d) still runs: %s", sb.ID, pid, stat)
		}
	}
	if sb.Checkpoint == "" {
		t.Fatalf("idle sandbox %s names no checkpoint", sb.ID)
	}
	if _, err := os.Stat(filepath.Join(root, "snapshots", sb.Checkpoint, "snapshot.json")); err != nil {
		t.Errorf("idle sandbox %s: its checkpoint %s is not on disk: %v", sb.ID, sb.Checkpoint, err)
	}
}

// assertNoSnapshots fails if the root holds any snapshot (complete or
// partial).
func assertNoSnapshots(t *testing.T, root string) {
	t.Helper()
	if entries, _ := os.ReadDir(filepath.Join(root, "snapshots")); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("snapshots left after the sandboxes were removed: %v", names)
	}
}

// An idle timeout through the CLI: a Python process with a counter in
// memory, an open file, a child and a listening socket is checkpointed
// once unused (by the background watcher sbx create starts), its
// processes and cgroups go, and the next exec restores it with all four
// intact. A sandbox with a call in progress longer than its timeout is
// not checkpointed meanwhile. Removing the sandbox removes its checkpoint,
// and the watcher ends once no sandbox has an idle timeout.
func TestIdleCheckpointAndResume(t *testing.T) {
	h := harness.NewHost(t)
	id := createCounter(t, h, "--idle-timeout", "3s")
	before := queryCounter(t, h, id, "set kept")
	pid := h.Inspect(t, id).Pid
	busy := h.Create(t, "--userns", "host", "--idle-timeout", "3s")
	// A call that lasts until the test releases it (at most 2 minutes):
	// the other sandbox's checkpoint may take longer than any fixed
	// sleep on a loaded machine.
	call := h.Command("exec", busy, "--", "sh", "-c", "i=0; while [ ! -e /tmp/release ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done")
	call.Env = append(os.Environ(), h.Env...)
	if err := call.Start(); err != nil {
		t.Fatal(err)
	}
	callDone := make(chan error, 1)
	go func() { callDone <- call.Wait() }()

	asleep := waitIdle(t, "the unused sandbox", 30*time.Second, func() sbx.Sandbox { return h.Inspect(t, id) })
	assertAsleep(t, h.Root, asleep, pid)
	if ps := h.Must(t, "ps", "-a"); !strings.Contains(ps, "idle, checkpointed") {
		t.Errorf("sbx ps does not say the sandbox is idle:\n%s", ps)
	}
	select {
	case err := <-callDone:
		t.Fatalf("the call ended before it was released: %v", err)
	default:
	}
	if sb := h.Inspect(t, busy); sb.Status != sbx.StatusRunning || sb.Idle {
		t.Fatalf("a sandbox with a call in progress was checkpointed: %s idle %v", sb.Status, sb.Idle)
	}
	h.Must(t, "exec", busy, "--", "touch", "/tmp/release")
	if err := <-callDone; err != nil {
		t.Fatalf("the call in the busy sandbox: %v", err)
	}

	// The next exec restores it first: the same processes go on.
	after := queryCounter(t, h, id, "get")
	if after.n <= before.n || after.value != "kept" || after.file != before.file {
		t.Fatalf("after the idle checkpoint: %+v, before %+v", after, before)
	}
	if sb := h.Inspect(t, id); sb.Status != sbx.StatusRunning || sb.Idle || sb.Checkpoint != "" {
		t.Fatalf("after the resume: status %s idle %v checkpoint %q", sb.Status, sb.Idle, sb.Checkpoint)
	}
	assertNoSnapshots(t, h.Root) // the checkpoint it resumed from went

	// Idle again, then removed while asleep: the checkpoint goes too.
	waitIdle(t, "the resumed sandbox", 30*time.Second, func() sbx.Sandbox { return h.Inspect(t, id) })
	waitIdle(t, "the busy sandbox, once its call ended", 30*time.Second, func() sbx.Sandbox { return h.Inspect(t, busy) })
	h.Must(t, "rm", "-f", id, busy)
	h.AssertNoLeaksOf(t, id)
	h.AssertNoLeaksOf(t, busy)
	assertNoSnapshots(t, h.Root)
	waitWatcherGone(t, filepath.Join(h.Root, "idle-watcher.lock"))
}

// waitWatcherGone waits (bounded) until no process holds the idle
// watcher's lock: the background watcher ended.
func waitWatcherGone(t *testing.T, lock string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		f, err := os.OpenFile(lock, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			t.Fatalf("no idle watcher lock at %s: no watcher ran", lock)
		}
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		f.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle watcher still runs 15 s after the last sandbox with an idle timeout was removed")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The idle timeout over REST: the server checkpoints an unused sandbox,
// the next exec through the server restores it transparently, and a
// create the idle policy cannot serve is refused and leaves nothing.
func TestIdleCheckpointOverREST(t *testing.T) {
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := harness.Context(t)
	c := e.C
	sb, err := c.Create(ctx, sbx.Options{Rootfs: fixture.BusyboxRootfs(t), IdleTimeout: 2 * time.Second, UserNS: sbx.UserNSHost})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.Options.IdleTimeout != 2*time.Second {
		t.Fatalf("the record's idle timeout: %v", sb.Options.IdleTimeout)
	}
	run := func(cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"sh", "-c", cmd}}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q: %v %+v", cmd, err, res)
		}
		return res.Stdout
	}
	run("echo awake > /root/f; sleep 1000 >/dev/null 2>&1 & echo $! > /root/pid")
	pid := sb.Pid
	asleep := waitIdle(t, "the sandbox", 30*time.Second, func() sbx.Sandbox {
		got, err := c.Inspect(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return *got
	})
	assertAsleep(t, e.Root, asleep, pid)
	// One call restores it: the file and the background process are there.
	if out := run("cat /root/f; kill -0 $(cat /root/pid) && echo alive"); out != "awake\nalive\n" {
		t.Fatalf("after the restore: %q", out)
	}
	if got, err := c.Inspect(ctx, sb.ID); err != nil || got.Status != sbx.StatusRunning || got.Idle {
		t.Fatalf("after the restore: %v %+v", err, got)
	}
	// A silent call longer than the timeout: the checkpoint attempts fail
	// while its connection is open, and the call ends well.
	if out := run("sleep 7; echo done"); out != "done\n" {
		t.Fatalf("a silent 7 s call: %q", out)
	}
	if out := run("cat /root/f"); out != "awake\n" {
		t.Fatalf("after the silent call: %q", out)
	}

	for _, bad := range []sbx.Options{
		{Rootfs: fixture.BusyboxRootfs(t), IdleTimeout: time.Minute, Network: sbx.NetworkHost, UserNS: sbx.UserNSHost},
		{Rootfs: fixture.BusyboxRootfs(t), IdleTimeout: time.Minute, Network: sbx.NetworkBridge, Publish: []string{"18080:80"}, UserNS: sbx.UserNSHost},
		{Rootfs: fixture.BusyboxRootfs(t), IdleTimeout: -time.Second, UserNS: sbx.UserNSHost},
		{Rootfs: fixture.BusyboxRootfs(t), IdleTimeout: time.Minute}, // a private user namespace, the default
	} {
		if made, err := c.Create(ctx, bad); !errors.Is(err, sbx.ErrInvalid) && !errors.Is(err, sbx.ErrUnsupported) && !errors.Is(err, sbx.ErrForbidden) {
			if made != nil {
				e.See(made.ID)
			}
			t.Errorf("create %+v: %v, want a refusal", bad, err)
		}
	}
	if list, err := c.List(ctx, sbx.Filter{}); err != nil || len(list) != 1 {
		t.Fatalf("after the refused creates: %v %d sandboxes", err, len(list))
	}
	if err := c.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	assertNoSnapshots(t, e.Root)
}
