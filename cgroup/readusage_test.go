package cgroup

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	ocg "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/sbxrun/sbx/internal/roottest"
)

// TestReadUsageMatchesGetStats runs a process in cgroups of its own (with
// memory and pids limits), lets it exit, and compares ReadUsage with what
// UsageFrom makes of libcontainer's full GetStats of the same cgroups.
// Needs root.
func TestReadUsageMatchesGetStats(t *testing.T) {
	if DetectMode() == ModeV2 {
		// v2 hosts keep GetStats (UsageFrom): ReadUsage declines.
		if _, ok, err := ReadUsage(map[string]string{"": Root}); ok || err != nil {
			t.Fatalf("ReadUsage on a v2 host: ok %v, err %v; want it to decline", ok, err)
		}
		return
	}
	roottest.Require(t, "it creates cgroups")
	t.Setenv(ParentEnv, "sbx-cgtest-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { _ = RemoveParentIfEmpty() })
	if err := EnsureParent(Limits{}); err != nil {
		t.Fatalf("EnsureParent (needs root): %v", err)
	}
	pids := int64(50)
	m, err := fs.NewManager(&ocg.Cgroup{Path: SandboxPath("usage"), Resources: &ocg.Resources{SkipDevices: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(-1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Destroy() })
	if err := m.Set(&ocg.Resources{SkipDevices: true, Memory: 64 << 20, PidsLimit: &pids}); err != nil {
		t.Fatal(err)
	}
	// A process that waits until it is in the cgroups, then burns some CPU
	// and memory there.
	r, w, _ := os.Pipe()
	cmd := exec.Command("sh", "-c", "read x; i=0; s=''; while [ $i -lt 3000 ]; do i=$((i+1)); s=\"$s.\"; done")
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := m.Apply(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("go\n"))
	w.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	paths := m.GetPaths()
	var got, want Usage
	for try := 0; try < 20; try++ { // kernel memory is freed a moment after the exit
		var ok bool
		got, ok, err = ReadUsage(paths)
		if err != nil || !ok {
			t.Fatalf("ReadUsage: %v %v", ok, err)
		}
		st, err := m.GetStats()
		if err != nil {
			t.Fatal(err)
		}
		if want = UsageFrom(st, paths); got == want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != want {
		t.Errorf("ReadUsage\n %+v\nGetStats\n %+v", got, want)
	}
	if got.CPUTime == 0 || got.MemoryPeak == 0 || got.MemoryLimit != 64<<20 || got.PidsLimit != 50 || got.PidsPeak == 0 {
		t.Errorf("usage %+v: the process's CPU, memory peak, limits and pids peak should show", got)
	}
	if _, _, err := ReadUsage(map[string]string{"memory": "/sys/fs/cgroup/memory/no-such-cgroup"}); err == nil {
		t.Error("ReadUsage of a missing cgroup: no error")
	}
}
