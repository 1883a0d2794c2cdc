package openhands_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
)

// restoreBenchKey is the Agent Server's session key in the restore
// benchmark; every readiness probe authenticates with it.
const restoreBenchKey = "restore-bench-session-key"

// BenchmarkOpenHandsRestore measures an Agent Server restored from a
// checkpoint against the same Agent Server started cold, each until its
// first authenticated call (GET /api/conversations/search with the session
// key, over a port connection into the sandbox) succeeds. The sandbox is
// the Agent Server image's root (its own venv: a checkpoint holds no
// volumes, so not the tree sbx serve mounts), network none, run as root.
// Once it answers, it is
// checkpointed (left running) into a snapshot; 3 restores of that snapshot
// are timed, then the source is stopped with a checkpoint and started
// again in place (the idle timeout's path). It reports the cold start, the
// median restore, their ratio, the in-place resume, the checkpoint's dump
// and the snapshot's size. The counts are fixed: run it with -benchtime 1x.
func BenchmarkOpenHandsRestore(b *testing.B) {
	trees := fixture.OpenHandsTrees(b)
	dir, err := os.MkdirTemp("", "sbxohr")
	if err != nil {
		b.Fatal(err)
	}
	h, err := sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		Executor: os.Getenv("SBX_EXECUTOR_BIN")})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Cleanup(func() {
		sbs, _ := h.List(ctx, sbx.Filter{})
		for _, sb := range sbs {
			if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				b.Errorf("remove %s: %v", sb.ID, err)
			}
		}
		snaps, _ := h.ListSnapshots(ctx)
		for _, s := range snaps {
			_ = h.RemoveSnapshot(ctx, s.Name)
		}
		if _, err := h.GC(ctx); err != nil {
			b.Errorf("gc: %v", err)
		}
		h.Close()
		ohAssertNoLeftovers(b, dir)
		os.RemoveAll(dir)
	})
	// As root: CRIU reads every process's limits (prlimit), which for a
	// process of another user needs CAP_SYS_RESOURCE, and hosts like these
	// lack it (docs/snapshots.md); so in the host's user namespace, as
	// checkpoints need.
	opts := sbx.Options{Rootfs: trees.Rootfs, Workdir: "/workspace/project", UserNS: sbx.UserNSHost,
		Cmd:    []string{"/usr/local/bin/openhands-agent-server", "--port", "60000"},
		Env:    []string{"OH_ENABLE_VNC=0", "LOG_JSON=true", "LITELLM_LOCAL_MODEL_COST_MAP=True", "SESSION_API_KEY=" + restoreBenchKey},
		Limits: sbx.Limits{MemoryBytes: 2 << 30, Pids: 2048}}

	b.ResetTimer()
	t0 := time.Now()
	src, err := h.Create(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	cold := agentReady(b, h, src.ID, t0)
	fmt.Fprintf(os.Stderr, "cold start: %.2fs (load %s)\n", cold.Seconds(), loadavg())

	b.StopTimer()
	snap, err := h.Checkpoint(ctx, src.ID, sbx.CheckpointOptions{Snapshot: "agent", LeaveRunning: true})
	if err != nil {
		b.Fatalf("checkpoint the Agent Server: %v", err)
	}
	fmt.Fprintf(os.Stderr, "checkpoint: dump %.2fs, layer %.2fs, %d MB (load %s)\n", snap.DumpS, snap.LayerS, snap.Bytes>>20, loadavg())
	b.StartTimer()
	var restores []time.Duration
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		sb, err := h.Restore(ctx, "agent", sbx.RestoreOptions{})
		if err != nil {
			b.Fatalf("restore %d: %v", i+1, err)
		}
		took := agentReady(b, h, sb.ID, t0)
		restores = append(restores, took)
		fmt.Fprintf(os.Stderr, "restore %d: %.2fs (load %s)\n", i+1, took.Seconds(), loadavg())
		b.StopTimer()
		if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if _, err := h.Stop(ctx, src.ID, sbx.StopOptions{Checkpoint: true}); err != nil {
		b.Fatalf("stop --checkpoint: %v", err)
	}
	b.StartTimer()
	t0 = time.Now()
	if _, err := h.Start(ctx, src.ID); err != nil {
		b.Fatalf("start from the checkpoint: %v", err)
	}
	resume := agentReady(b, h, src.ID, t0)
	fmt.Fprintf(os.Stderr, "resume in place: %.2fs (load %s)\n", resume.Seconds(), loadavg())
	b.StopTimer()

	sort.Slice(restores, func(i, j int) bool { return restores[i] < restores[j] })
	restore := restores[len(restores)/2]
	b.ReportMetric(cold.Seconds(), "cold_s")
	b.ReportMetric(restore.Seconds(), "restore_p50_s")
	b.ReportMetric(cold.Seconds()/restore.Seconds(), "cold/restore")
	b.ReportMetric(resume.Seconds(), "resume_s")
	b.ReportMetric(snap.DumpS, "dump_s")
	b.ReportMetric(float64(snap.Bytes)/(1<<20), "snapshot_MB")
}

// agentReady waits (bounded) until the Agent Server in sandbox id answers
// an authenticated call, and returns the time since t0.
func agentReady(b *testing.B, h *sandbox.Host, id string, t0 time.Time) time.Duration {
	b.Helper()
	for deadline := t0.Add(10 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if agentAnswers(h, id) {
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			sb, _ := h.Get(context.Background(), id)
			b.Fatalf("the Agent Server in %s did not answer within 10 minutes (%+v)", id, sb)
		}
	}
}

// agentAnswers makes one authenticated call to the Agent Server on port
// 60000 of sandbox id, over a port connection.
func agentAnswers(h *sandbox.Host, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := h.DialPort(ctx, id, 60000)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req, _ := http.NewRequest("GET", "http://agent/api/conversations/search", nil)
	req.Header.Set("X-Session-API-Key", restoreBenchKey)
	req.Close = true
	if err := req.Write(c); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode == http.StatusOK
}
