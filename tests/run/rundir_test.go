package run

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRunDirectoryIsATmpfs: while a run lives, its directory under the run
// root (its records and the mount points of its root, cgroup view and
// /dev) is a small tmpfs of its own, whatever file system the run root is
// on; the run's end unmounts and removes it.
func TestRunDirectoryIsATmpfs(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	cmd := exec.Command(harness.SbxBin, "run", "--rootfs", root, "--", "sleep", "3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 3") == 1 })
	runs, _ := filepath.Glob(filepath.Join(os.Getenv("SBX_RUN_ROOT"), "runs", "run-*"))
	if len(runs) != 1 {
		t.Fatalf("want one run directory, got %v", runs)
	}
	for _, p := range []string{runs[0], filepath.Join(runs[0], "owner")} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is on file system type %#x, want a tmpfs", p, st.Type)
		}
	}
	var parent, dir unix.Stat_t
	if unix.Stat(filepath.Dir(runs[0]), &parent) != nil || unix.Stat(runs[0], &dir) != nil || parent.Dev == dir.Dev {
		t.Errorf("%s is not a mount of its own", runs[0])
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sbx run: %v", err)
	}
	harness.AssertNoLeftovers(t)
}
