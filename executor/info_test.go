package executor

import (
	"os"
	"path/filepath"
	"testing"
)

// A v1 host that mounts cpu and cpuacct together shows the sandbox one
// directory, "cpu,cpuacct", and no per-controller links: the limits and
// usage are still found there.
func TestReadInfoCoMountedHierarchies(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu,cpuacct/cpu.cfs_quota_us", "50000\n")
	write("cpu,cpuacct/cpu.cfs_period_us", "100000\n")
	write("cpu,cpuacct/cpuacct.usage", "2500000000\n")
	write("memory/memory.limit_in_bytes", "268435456\n")
	write("memory/memory.usage_in_bytes", "1048576\n")
	write("pids/pids.max", "64\n")
	write("pids/pids.current", "3\n")
	write("self-cgroup", "7:pids:/\n4:cpu,cpuacct:/\n3:memory:/\n1:name=systemd:/\n0::/\n")

	oldRoot, oldSelf := cgroupRoot, selfCgroup
	cgroupRoot, selfCgroup = root, filepath.Join(root, "self-cgroup")
	t.Cleanup(func() { cgroupRoot, selfCgroup = oldRoot, oldSelf })

	info := readInfo(root)
	if info.CPU.Limit != 0.5 {
		t.Errorf("cpu limit = %v, want 0.5 (from cpu,cpuacct/cpu.cfs_quota_us)", info.CPU.Limit)
	}
	if info.CPU.UsageS != 2.5 {
		t.Errorf("cpu usage = %v s, want 2.5 (from cpu,cpuacct/cpuacct.usage)", info.CPU.UsageS)
	}
	if info.Memory.LimitBytes != 256<<20 || info.Memory.UsedBytes != 1<<20 {
		t.Errorf("memory = %d used of %d, want %d of %d", info.Memory.UsedBytes, info.Memory.LimitBytes, 1<<20, 256<<20)
	}
	if info.Pids.Limit != 64 || info.Pids.Current != 3 {
		t.Errorf("pids = %d of %d, want 3 of 64", info.Pids.Current, info.Pids.Limit)
	}
	if got := hierarchy("cpuacct"); got != filepath.Join(root, "cpu,cpuacct") {
		t.Errorf("hierarchy(cpuacct) = %s", got)
	}
	if got := hierarchy("memory"); got != filepath.Join(root, "memory") {
		t.Errorf("hierarchy(memory) = %s", got)
	}
}
