package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// After kill -9 of its PID 1 a sandbox shows as stopped in ps and
// inspect, and exec and cp fail with exit 1 and a message that says what
// happened and what to do, not a raw "connection refused".
func TestLifecycleDeadPid1(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t)
	pid := h.inspect(t, id).Pid
	if pid <= 0 {
		t.Fatal("inspect shows no PID")
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); os.IsNotExist(err) {
			break
		}
		if i == 500 {
			t.Fatalf("pid %d still there 5s after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var list []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.must(t, "ps", "-a", "--format", "json")), &list); err != nil || len(list) != 1 {
		t.Fatalf("ps --format json: %v %v", list, err)
	}
	if list[0].Status != sbx.StatusStopped {
		t.Fatalf("ps shows %s after kill -9 of PID 1, want stopped", list[0].Status)
	}
	if sb := h.inspect(t, id); sb.Status != sbx.StatusStopped {
		t.Fatalf("inspect shows %s, want stopped", sb.Status)
	}
	const want = "is stopped: its PID 1 exited; sbx start or sbx rm it"
	for _, args := range [][]string{{"exec", id, "--", "true"}, {"cp", id + ":/etc/hostname", t.TempDir()}} {
		r := h.sbx(t, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "connection refused") {
			t.Fatalf("sbx %s on a dead sandbox: exit %d %q; want 1 and %q", args[0], r.code, r.stderr, want)
		}
	}
	h.must(t, "rm", id)
}

// Without --disk the writable layer is capped at --memory: its tmpfs
// pages count toward the memory limit anyway. Writing twice the limit
// fails (ENOSPC or an OOM kill) and the sandbox keeps answering.
func TestLifecycleDiskDefaultsToMemory(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t, "--memory", "64m")
	if got := h.inspect(t, id).Options.Limits.DiskBytes; got != 64<<20 {
		t.Fatalf("disk cap without --disk under --memory 64m: %d, want %d", got, 64<<20)
	}
	if out := h.must(t, "exec", id, "--", "sh", "-c", "df -k / | tail -1"); !strings.Contains(out, " 65536 ") {
		t.Fatalf("df of / under --memory 64m: %q, want a 65536 KiB file system", out)
	}
	r := h.sbx(t, "", "exec", id, "--", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=128")
	if r.code == 0 {
		t.Fatalf("writing 128 MiB under --memory 64m succeeded: %s", r.stderr)
	}
	t.Logf("writing 128 MiB: exit %d %q", r.code, r.stderr)
	if r.code != 137 && !strings.Contains(r.stderr, "No space left") {
		t.Fatalf("writing 128 MiB: exit %d %q; want ENOSPC or an OOM kill (137)", r.code, r.stderr)
	}
	h.must(t, "exec", id, "--", "rm", "-f", "/big")
	if out := h.must(t, "exec", id, "--", "echo", "alive"); out != "alive\n" {
		t.Fatalf("after the failed write: %q", out)
	}
	h.must(t, "rm", "-f", id)
}

// sbx cp ID:relative is relative to the sandbox's working directory, both
// ways; a missing sandbox path exits 1 with "no such file".
func TestLifecycleCpRelativeAndMissing(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t, "-w", "/work")
	h.must(t, "exec", id, "--", "sh", "-c", "echo inside > /work/f")
	dir := t.TempDir()
	h.must(t, "cp", id+":f", filepath.Join(dir, "got"))
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "inside\n" {
		t.Fatalf("cp %s:f: %q, %v", id, b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "up"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.must(t, "cp", filepath.Join(dir, "up"), id+":sub-up")
	if out := h.must(t, "exec", id, "--", "cat", "/work/sub-up"); out != "outside\n" {
		t.Fatalf("cp to %s:sub-up landed elsewhere: %q", id, out)
	}
	r := h.sbx(t, "", "cp", id+":/missing", filepath.Join(dir, "x"))
	if r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("sbx cp %s:/missing: exit %d %q; want 1 and \"no such file\"", id, r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Fatalf("a failed cp left %s: %v", filepath.Join(dir, "x"), err)
	}
	h.must(t, "rm", "-f", id)
}
