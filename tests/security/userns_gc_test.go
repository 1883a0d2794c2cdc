package security

import (
	"os"
	"os/exec"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestUserNSOneShotKilledIsCollected: a `sbx run --userns private` whose
// sbx is killed leaves its run directory and the user id range leased for
// it; sbx gc releases both (with the container and its cgroups), so the
// range can go to another sandbox and nothing is left.
func TestUserNSOneShotKilledIsCollected(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	cmd := exec.Command(harness.SbxBin, "run", "--userns", "private", "--rootfs", root, "--", "sleep", "113")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 113") == 1 })
	if left := usernsLeasesOf(t, os.Getenv("SBX_RUN_ROOT")); len(left) != 1 {
		t.Fatalf("a running run holds %d user namespace leases (%v), want 1", len(left), left)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if r := harness.RunSbx(t, "", "gc"); r.Code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := harness.CountHostProcesses(t, "sleep 113"); n != 0 {
		t.Errorf("gc left the killed run's command running (%d)", n)
	}
	if left := usernsLeasesOf(t, os.Getenv("SBX_RUN_ROOT")); len(left) > 0 {
		t.Errorf("leases left after the killed run and gc: %v", left)
	}
	harness.AssertNoLeftovers(t)
}
