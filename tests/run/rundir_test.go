package run

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRunDirectoryIsATmpfs: while a run lives, its directory under the run
// root (its records and the mount points of its root, cgroup view and
// /dev) is a small tmpfs of its own, whatever file system the run root is
// on; the run's end unmounts and removes it.
func TestRunDirectoryIsATmpfs(t *testing.T) {
	cmd, dir := startSleepingRun(t, "3")
	for _, p := range []string{dir, filepath.Join(dir, "owner")} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Type != unix.TMPFS_MAGIC {
			t.Errorf("%s is on file system type %#x, want a tmpfs", p, st.Type)
		}
	}
	var parent, own unix.Stat_t
	if unix.Stat(filepath.Dir(dir), &parent) != nil || unix.Stat(dir, &own) != nil || parent.Dev == own.Dev {
		t.Errorf("%s is not a mount of its own", dir)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sbx run: %v", err)
	}
	harness.AssertNoLeftovers(t)
}
