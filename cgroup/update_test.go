package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
)

// TestUpdateWritesWhatLibcontainerWrites: on a v1 or hybrid host Update
// writes the limit files itself; through a series of limits (set, lowered,
// lifted, set again) its cgroup holds what libcontainer's manager writes
// into a twin cgroup. Needs root.
func TestUpdateWritesWhatLibcontainerWrites(t *testing.T) {
	roottest.Require(t, "it creates cgroups")
	if m := DetectMode(); m != ModeV1 && m != ModeHybrid {
		t.Skipf("cgroup mode %s: Update goes through libcontainer's manager", m)
	}
	if err := EnsureParent(Limits{}); err != nil {
		t.Fatal(err)
	}
	mine, theirs := "update-mine-"+strconv.Itoa(os.Getpid()), "update-theirs-"+strconv.Itoa(os.Getpid())
	files := map[string][]string{"memory": {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"},
		"cpu": {"cpu.cfs_quota_us", "cpu.cfs_period_us"}, "pids": {"pids.max"}}
	for _, id := range []string{mine, theirs} {
		for c := range files {
			dir := filepath.Join(Root, c, SandboxPath(id))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(dir) })
		}
	}
	for _, l := range []Limits{
		{MemoryBytes: 256 << 20, CPUs: 1.5, Pids: 100},
		{MemoryBytes: 64 << 20, CPUs: 0.25, Pids: 20},
		{},
		{MemoryBytes: 128 << 20, CPUs: 0.5},
		{Pids: 64},
	} {
		if err := Update(mine, l); err != nil {
			t.Fatalf("Update %+v: %v", l, err)
		}
		if err := updateWithManager(theirs, l.updateResources()); err != nil {
			t.Fatalf("libcontainer %+v: %v", l, err)
		}
		for c, names := range files {
			for _, n := range names {
				got, gerr := os.ReadFile(filepath.Join(Root, c, SandboxPath(mine), n))
				want, werr := os.ReadFile(filepath.Join(Root, c, SandboxPath(theirs), n))
				if os.IsNotExist(gerr) && os.IsNotExist(werr) {
					continue // no swap accounting on this kernel
				}
				if gerr != nil || werr != nil || string(got) != string(want) {
					t.Errorf("limits %+v: %s is %q (%v), libcontainer wrote %q (%v)", l, n, got, gerr, want, werr)
				}
			}
		}
	}
	if err := Update(mine, Limits{MemoryBytes: 1 << 20}); err == nil {
		t.Error("Update took a memory limit below the minimum")
	}
}
