package lifecycle

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// usable fails unless the sandbox id answers an exec within a deadline and
// its record says running: it is not left frozen.
func usable(h *harness.Host, t *testing.T, id, after string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+h.Netns, harness.SbxBin, "--root", h.Root, "--run-root", h.Run, "exec", id, "--", "true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("after %s: sbx exec %s: %v %s (left frozen?)", after, id, err, out)
		return false
	}
	if st := h.Inspect(t, id).Status; st != "running" {
		t.Errorf("after %s: the record says %s, want running", after, st)
		return false
	}
	return true
}

// An export, commit or diff killed while it holds the sandbox paused (kill
// -9 at the pause, a closed pipe) does not leave the sandbox frozen: the
// pause is recorded before the freeze, the next operation thaws it.
func TestReadPauseInterrupted(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	id := strings.TrimSpace(h.Must(t, "create", h.ImportBusybox(t, "rp-base:1")))
	h.Saw(id)
	h.Must(t, "exec", id, "--", "sh", "-c", "echo changed > /changed")
	frozen := map[string]int{}
	for _, what := range []string{"export", "commit", "diff"} {
		for i := 0; i < 10; i++ {
			args := map[string][]string{
				"export": {"export", "-o", filepath.Join(t.TempDir(), "x.tar"), id},
				"commit": {"commit", id, fmt.Sprintf("rp/img:%d", i)},
				"diff":   {"diff", id},
			}[what]
			r := h.SbxEnv(t, []string{"SBX_TEST_CRASH_AT=" + what + "-paused"}, "", args...)
			if r.Code != -1 {
				t.Errorf("sbx %s with SBX_TEST_CRASH_AT=%s-paused: exit %d, want killed at the crash point\n%s", what, what, r.Code, r.Stderr)
			}
			if !usable(h, t, id, "a kill -9 of sbx "+what) {
				frozen[what]++
				h.Sbx(t, "", "resume", id)
			}
		}
	}
	// sbx export ID | head -c 1000: the reader goes away mid-stream.
	for i := 0; i < 10; i++ {
		cmd := h.Command("export", id)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		stdout.Close()
		_ = cmd.Wait()
		if !usable(h, t, id, "sbx export | head -c 1000") {
			frozen["export-pipe"]++
			h.Sbx(t, "", "resume", id)
		}
	}
	// A plain kill -9 of an export blocked on a full pipe.
	for i := 0; i < 10; i++ {
		cmd := h.Command("export", id)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the pipe fills; the export waits, paused
		_ = cmd.Process.Signal(syscall.SIGKILL)
		stdout.Close()
		_ = cmd.Wait()
		if !usable(h, t, id, "kill -9 of a blocked export") {
			frozen["export-kill"]++
			h.Sbx(t, "", "resume", id)
		}
	}
	t.Logf("left frozen: %v (of 10 each)", frozen)
	if len(frozen) > 0 {
		t.Errorf("left frozen: %v (of 10 each)", frozen)
	}
}

// A sandbox whose freezer is frozen while its record says running (what an
// interrupted export left before the pause was recorded, or a freeze from
// outside sbx) is thawed by sbx resume and by sbx gc.
func TestResumeAndGCThawFrozenRunning(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	for _, heal := range []string{"resume", "gc"} {
		freeze(t, id)
		if heal == "gc" {
			h.Must(t, "gc")
		} else {
			h.Must(t, "resume", id)
		}
		usable(h, t, id, "sbx "+heal+" of a frozen sandbox recorded running")
	}
}

// freeze freezes the sandbox id through its cgroup, as an interrupted
// pause left it: the topmost freezer.state (v1) or cgroup.freeze (v2) whose
// path names the sandbox.
func freeze(t *testing.T, id string) {
	t.Helper()
	var found string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipDir
		}
		if d.IsDir() && strings.Contains(d.Name(), id) {
			for _, f := range []string{"freezer.state", "cgroup.freeze"} {
				if _, err := os.Stat(filepath.Join(p, f)); err == nil {
					found = filepath.Join(p, f)
					return filepath.SkipAll
				}
			}
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no freezer of sandbox %s under /sys/fs/cgroup", id)
	}
	v := "1"
	if strings.HasSuffix(found, "freezer.state") {
		v = "FROZEN"
	}
	if err := os.WriteFile(found, []byte(v), 0o644); err != nil {
		t.Fatalf("freeze %s: %v", found, err)
	}
}

// An exec against a sandbox frozen behind its record's back fails within
// a deadline, saying so, instead of hanging.
func TestExecFailsOnFrozenSandbox(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	freeze(t, id)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+h.Netns, harness.SbxBin, "--root", h.Root, "--run-root", h.Run, "exec", id, "--", "true").CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "frozen") {
		t.Fatalf("exec in a frozen sandbox: %v after %v: %s", err, time.Since(start), out)
	}
	h.Must(t, "resume", id)
	usable(h, t, id, "resume")
}
