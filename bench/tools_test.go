package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// The tools that find where the time goes (docs/bench.md, "Tools for
// finding where the time goes") are built and run here, so that they keep
// working: bench/floor's C programs as any user, bench/abtest and
// bench/trace's programs as root.

// run runs name with args and returns its output, failing t on an error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestFloorTools builds bench/floor's programs with gcc as their comments
// say and runs each: spawn's percentiles, stepcount's exact count of the
// 3-instruction tiny program, cpuid's cost.
func TestFloorTools(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("bench/floor is x86-64 code (tiny.S, cpuid); this is %s", runtime.GOARCH)
	}
	dir := t.TempDir()
	bin := func(name string) string { return filepath.Join(dir, name) }
	run(t, "gcc", "-O2", "-static", "-o", bin("spawn"), "floor/spawn.c")
	run(t, "gcc", "-nostdlib", "-static", "-o", bin("tiny"), "floor/tiny.S")
	run(t, "gcc", "-O2", "-o", bin("stepcount"), "floor/stepcount.c")
	run(t, "gcc", "-O2", "-o", bin("cpuid"), "floor/cpuid.c")

	if out := run(t, bin("spawn"), "20", bin("tiny")); !regexp.MustCompile(`tiny: p10 \d+ p50 \d+ p90 \d+ us`).MatchString(out) {
		t.Errorf("spawn printed %q", out)
	}
	if out := run(t, bin("stepcount"), bin("tiny")); !strings.Contains(out, ": 3 instructions, 0 cpuid, 0 rdtsc, 1 syscall") {
		t.Errorf("stepcount of tiny (mov, xor, syscall) printed %q", out)
	}
	if out := run(t, bin("cpuid")); !regexp.MustCompile(`^cpuid: [0-9.]+ us each\n$`).MatchString(out) {
		t.Errorf("cpuid printed %q", out)
	}
}

// TestTraceAndABTestTools runs the root-only tools once each, briefly:
// abtest.py on two names for the same sbx binary (cold and ready rounds
// and the paired ratio), executorstart.py on the sbx binary's executor
// with and without a setting, attachgap's table of cgroup moves, churncpu's
// CPU per create and remove; the Python scripts of bench/trace and
// bench/abtest compile, and pstat.sh parses.
func TestTraceAndABTestTools(t *testing.T) {
	roottest.Require(t, "the tools start sandboxes and write cgroups")
	sbxBin := os.Getenv("SBX_BIN")
	if sbxBin == "" {
		t.Fatal("set SBX_BIN to a static sbx binary (make build; make test sets it)")
	}
	rootfs := fixture.BusyboxRootfs(t)
	// The tools' sandboxes and cgroups live under a parent of this test's.
	release := cgroup.PrivateParent("sbx-test-tools")
	t.Cleanup(func() {
		if err := release(); err != nil {
			t.Errorf("the tools left cgroups behind: %v", err)
		}
	})
	for _, py := range []string{"abtest/abtest.py", "abtest/roundtrip.py", "abtest/executorstart.py", "trace/phases.py", "trace/tail.py"} {
		run(t, "python3", "-m", "py_compile", py)
	}
	t.Cleanup(func() {
		os.RemoveAll("abtest/__pycache__")
		os.RemoveAll("trace/__pycache__")
	})
	run(t, "sh", "-n", "trace/pstat.sh")

	out := run(t, "python3", "abtest/abtest.py", "-n", "2", "--warmup", "0", "--rootfs", rootfs, "a="+sbxBin, "b="+sbxBin)
	for _, want := range []string{"2 rounds;", "cold  a ", "ready b ", "cold  paired b/a: median", "ready paired b/a: median", "cpu   paired b/a: median"} {
		if !strings.Contains(out, want) {
			t.Errorf("abtest.py printed no %q:\n%s", want, out)
		}
	}
	// The target's form: the root imported as an image, the host's user namespace.
	out = run(t, "python3", "abtest/abtest.py", "-n", "1", "--warmup", "0", "--image", "--userns", "host", "--rootfs", rootfs, "a="+sbxBin, "b="+sbxBin)
	if !strings.Contains(out, "cold  paired b/a: median") {
		t.Errorf("abtest.py --image --userns host printed no paired cold ratio:\n%s", out)
	}

	out = run(t, "python3", "abtest/executorstart.py", "-n", "2", "--warmup", "0", "a="+sbxBin, "b="+sbxBin+",GOMAXPROCS=1")
	for _, want := range []string{"2 rounds;", "a          wall p50", "paired b/a: wall"} {
		if !strings.Contains(out, want) {
			t.Errorf("executorstart.py printed no %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	tags := "seccomp netgo osusergo"
	run(t, "go", "build", "-o", filepath.Join(dir, "attachgap"), "./trace/attachgap")
	run(t, "go", "build", "-tags", tags, "-o", filepath.Join(dir, "churncpu"), "./trace/churncpu")
	parent := "/sys/fs/cgroup/pids" // v1 and hybrid hosts
	if _, err := os.Stat(parent); err != nil {
		parent = "/sys/fs/cgroup"
	}
	out = run(t, filepath.Join(dir, "attachgap"), parent)
	if n := strings.Count(out, "before the move: p10"); n != 8 {
		t.Errorf("attachgap printed %d of 8 rows:\n%s", n, out)
	}
	if n := strings.Count(out, "pause 64ms, "); n != 6 {
		t.Errorf("attachgap printed %d of 6 rows after WarmAttach:\n%s", n, out)
	}
	out = run(t, filepath.Join(dir, "churncpu"), "-n", "2", "-c", "1", "-rootfs", rootfs)
	if !regexp.MustCompile(`2 cycles c=1: [0-9.]+/s; CPU per cycle: self [0-9.]+ ms, children [0-9.]+ ms`).MatchString(out) {
		t.Errorf("churncpu printed %q", out)
	}
}
