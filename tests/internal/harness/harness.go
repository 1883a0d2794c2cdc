// Package harness is what the root-only test packages under tests/ share:
// their TestMain (Main), the sbx binary under test and how to run it
// (SbxBin, RunSbx, MustRun, Result), a private sbx state per test (Host),
// an in-process server (ServerEnv) and an `sbx serve` process (ServeProc),
// stand-in host network namespaces (HostNS), the adversary program and its
// escape checks (AdversaryRoot, EscapeChecks), and the leak checks
// (AssertNoLeftovers, Host.AssertNoLeaks, ServerAssertNoLeaks). Fixtures
// (busybox and Debian roots, a registry on 127.0.0.1) are in tests/fixture.
package harness

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/isolate"
)

// SbxBin is the statically linked sbx binary under test: $SBX_BIN (set by
// `make test`), or one built into a temporary directory.
var SbxBin string

// HelpersDir holds the helper binaries tests run directly.
var HelpersDir string

// Main is the TestMain of every package under tests/, named by name
// ("tests/images"): every test there needs root and a real kernel. It
// finds the sbx binary (SbxBin), gives the test binary a private runtime
// root (SBX_RUN_ROOT) and parent cgroup so that leftover checks see only
// its own sandboxes, runs the tests and the atExit cleanups, and exits.
func Main(m *testing.M, name string) {
	isolate.Init() // tests start sandboxes in this process
	flag.Parse()
	if run, code := roottest.Package(name, "integration tests against the real kernel"); !run {
		os.Exit(code)
	}
	helperbin.ExitUnlessEmbedded(name)
	cleanup, err := findSbx()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	// A private runtime root: leftovers are checked there, undisturbed by
	// other sbx processes on the machine.
	runRoot := fmt.Sprintf("/run/sbx-test-%d", os.Getpid())
	os.Setenv("SBX_RUN_ROOT", runRoot)
	// Traversable (not readable): tests put run roots below it, and
	// private user namespaces (the default) reach theirs by path.
	if err := os.MkdirAll(runRoot, 0o711); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	if HelpersDir, err = os.MkdirTemp("", "sbx-test-helpers-"); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	// A private parent cgroup: every sandbox these tests (and the sbx
	// processes they start) create lives under it, so cgroup leftovers
	// are this test binary's own, never another sbx user's. Helper
	// processes (this binary re-run by a test) keep their parent's.
	releaseParent := cgroup.PrivateParent("sbx-test")
	code := m.Run()
	for _, f := range atExit {
		f()
	}
	os.RemoveAll(HelpersDir)
	cleanup()
	os.RemoveAll(runRoot)
	// The parent cgroup goes when no sandbox is left in it.
	_ = releaseParent()
	os.Exit(code)
}

// atExit are cleanups of fixtures shared by several tests, run by Main
// after the tests.
var atExit []func()

// findSbx sets SbxBin from $SBX_BIN, or builds sbx into a temporary
// directory and returns what removes it.
func findSbx() (func(), error) {
	if p := os.Getenv("SBX_BIN"); p != "" {
		SbxBin = p
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sbx-bin-")
	if err != nil {
		return nil, err
	}
	SbxBin = filepath.Join(dir, "sbx")
	cmd := exec.Command("go", "build", "-tags", "seccomp netgo osusergo", "-ldflags", `-extldflags "-static"`, "-o", SbxBin, "github.com/sbxrun/sbx/cmd/sbx")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build sbx: %v\n%s", err, out)
	}
	return func() { os.RemoveAll(dir) }, nil
}

// Result is the outcome of one sbx invocation.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// RunSbx runs the sbx binary with args and optional stdin, using a private
// runtime root so that tests can check for leftovers.
func RunSbx(t testing.TB, stdin string, args ...string) Result {
	t.Helper()
	return RunCmd(t, exec.Command(SbxBin, args...), stdin)
}

// RunCmd runs cmd with optional stdin and collects its output and exit
// code; only a failure to start it fails the test.
func RunCmd(t testing.TB, cmd *exec.Cmd, stdin string) Result {
	t.Helper()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %v: %v", cmd.Args, err)
		}
		code = ee.ExitCode()
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// MustRun runs sbx and fails the test unless it exits 0.
func MustRun(t testing.TB, args ...string) string {
	t.Helper()
	r := RunSbx(t, "", args...)
	if r.Code != 0 {
		t.Fatalf("sbx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// AssertNoLeftovers fails if any one-shot run left mounts, cgroups, state
// or processes behind.
func AssertNoLeftovers(t testing.TB) {
	t.Helper()
	runRoot := os.Getenv("SBX_RUN_ROOT")
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, runRoot+"/runs/") {
			t.Errorf("leftover mount: %s", line)
		}
	}
	if entries, _ := os.ReadDir(runRoot + "/runs"); len(entries) > 0 {
		t.Errorf("leftover run directories: %d in %s/runs", len(entries), runRoot)
	}
	if entries, _ := os.ReadDir(runRoot + "/containers"); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "run-") {
				t.Errorf("leftover container state: %s", e.Name())
			}
		}
	}
	// The parent cgroup is this test binary's own (Main), so every
	// one-shot run's cgroup under it is a leftover of these tests.
	for id, paths := range cgroup.Leftovers() {
		if strings.HasPrefix(id, "run-") {
			t.Errorf("leftover cgroups of %s: %v", id, paths)
		}
	}
}
