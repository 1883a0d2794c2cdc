package run

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestGCRunWhoseInitIsStillRunning: gc finds a one-shot run whose sbx
// process is gone (here: its owner record no longer matches a live
// process) while the sandbox's processes still run, as right after a
// kill -9 of sbx run. gc must kill them, wait for them and remove
// everything, not fail with "container still running".
func TestGCRunWhoseInitIsStillRunning(t *testing.T) {
	cmd, dir := startSleepingRun(t, "108")
	// A record of a process that does not exist: pid 1 started at tick 0.
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte("1 0"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := harness.RunSbx(t, "", "gc")
	if r.Code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := harness.CountHostProcesses(t, "sleep 108"); n != 0 {
		t.Errorf("gc left the run's command running (%d)", n)
	}
	_ = cmd.Wait()
	harness.AssertNoLeftovers(t)
}

// startSleepingRun starts `sbx run --rootfs BUSYBOX -- sleep SECONDS`,
// waits until its command runs and returns the sbx process (killed at
// the test's end if still running) and the run's directory.
func startSleepingRun(t *testing.T, seconds string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(harness.SbxBin, "run", "--rootfs", fixture.BusyboxRootfs(t), "--", "sleep", seconds)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep "+seconds) == 1 })
	runs, _ := filepath.Glob(filepath.Join(os.Getenv("SBX_RUN_ROOT"), "runs", "run-*"))
	if len(runs) != 1 {
		t.Fatalf("want one run directory, got %v", runs)
	}
	return cmd, runs[0]
}
