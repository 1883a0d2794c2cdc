package cgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	ocg "github.com/opencontainers/cgroups"
	"github.com/sbxrun/sbx/internal/roottest"
)

// TestDetectModeAgreesWithLibcontainer: the mode read at Root is the one
// libcontainer (opencontainers/cgroups) sees, which creates the sandboxes'
// cgroups below the parent.
func TestDetectModeAgreesWithLibcontainer(t *testing.T) {
	want := ModeV1
	switch {
	case ocg.IsCgroup2UnifiedMode():
		want = ModeV2
	case ocg.IsCgroup2HybridMode():
		want = ModeHybrid
	}
	if got := DetectMode(); got != want {
		t.Errorf("DetectMode %s, libcontainer sees %s", got, want)
	}
	ctrls, err := Controllers()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !strings.Contains(" "+strings.Join(ctrls, " ")+" ", " "+c+" ") {
			t.Errorf("controllers %v lack %s", ctrls, c)
		}
	}
}

// TestEnsureParentCreatesEveryHierarchy makes a parent of its own with a
// budget: its directory in every hierarchy that limits sandboxes (cpuset
// with the CPUs and memory nodes of the root, so that a sandbox can join
// it), the budget's limits written, and nothing left after
// RemoveParentIfEmpty. Needs root.
func TestEnsureParentCreatesEveryHierarchy(t *testing.T) {
	roottest.Require(t, "it creates the parent cgroup")
	name := "sbx-cgtest-" + strconv.Itoa(os.Getpid())
	t.Setenv(ParentEnv, name)
	t.Cleanup(func() { _ = RemoveParentIfEmpty() })
	if err := EnsureParent(Limits{}); err != nil {
		t.Fatalf("EnsureParent (needs root): %v", err)
	}
	if err := EnsureParent(Limits{}); err != nil {
		t.Fatalf("second EnsureParent: %v", err)
	}
	budget := Limits{MemoryBytes: 512 << 20, CPUs: 1.5, Pids: 300}
	if err := EnsureParent(budget); err != nil {
		t.Fatalf("EnsureParent with a budget: %v", err)
	}
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
		}
		return strings.TrimSpace(string(data))
	}
	if DetectMode() == ModeV2 {
		dir := filepath.Join(Root, name)
		if got := read(filepath.Join(dir, "memory.max")); got != "536870912" {
			t.Errorf("memory.max %q", got)
		}
		if got := read(filepath.Join(dir, "pids.max")); got != "300" {
			t.Errorf("pids.max %q", got)
		}
		if got := read(filepath.Join(dir, "cpu.max")); got != "150000 100000" {
			t.Errorf("cpu.max %q", got)
		}
	} else {
		for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio"} {
			if _, err := os.Stat(filepath.Join(Root, h, name)); err != nil {
				t.Errorf("hierarchy %s: %v", h, err)
			}
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if got, root := read(filepath.Join(Root, "cpuset", name, f)), read(filepath.Join(Root, "cpuset", f)); got == "" || got != root {
				t.Errorf("%s %q, root's %q", f, got, root)
			}
		}
		if got := read(filepath.Join(Root, "memory", name, "memory.limit_in_bytes")); got != "536870912" {
			t.Errorf("memory.limit_in_bytes %q", got)
		}
		if got := read(filepath.Join(Root, "pids", name, "pids.max")); got != "300" {
			t.Errorf("pids.max %q", got)
		}
		if got := read(filepath.Join(Root, "cpu", name, "cpu.cfs_quota_us")); got != "150000" {
			t.Errorf("cpu.cfs_quota_us %q", got)
		}
	}
	if err := RemoveParentIfEmpty(); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(Root, "*", name))
	if _, err := os.Stat(filepath.Join(Root, name)); err == nil {
		left = append(left, filepath.Join(Root, name))
	}
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
