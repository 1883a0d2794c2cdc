package tests

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

// sbxBin is the statically linked sbx binary under test: $SBX_BIN (set by
// `make test`), or one built into a temporary directory.
var sbxBin string

// testHelpersDir holds the helper binaries tests run directly.
var testHelpersDir string

func TestMain(m *testing.M) {
	isolate.Init() // tests start sandboxes in this process
	flag.Parse()
	if run, code := roottest.Package("tests", "integration tests against the real kernel"); !run {
		os.Exit(code)
	}
	helperbin.ExitUnlessEmbedded("tests")
	cleanup, err := findSbx()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		os.Exit(1)
	}
	// A private runtime root: leftovers are checked there, undisturbed by
	// other sbx processes on the machine.
	runRoot := fmt.Sprintf("/run/sbx-test-%d", os.Getpid())
	os.Setenv("SBX_RUN_ROOT", runRoot)
	if testHelpersDir, err = os.MkdirTemp("", "sbx-test-helpers-"); err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
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
	os.RemoveAll(testHelpersDir)
	cleanup()
	os.RemoveAll(runRoot)
	// The parent cgroup goes when no sandbox is left in it.
	_ = releaseParent()
	os.Exit(code)
}

// atExit are cleanups of fixtures shared by several tests, run by TestMain.
var atExit []func()

func findSbx() (func(), error) {
	if p := os.Getenv("SBX_BIN"); p != "" {
		sbxBin = p
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sbx-bin-")
	if err != nil {
		return nil, err
	}
	sbxBin = filepath.Join(dir, "sbx")
	cmd := exec.Command("go", "build", "-tags", "seccomp netgo osusergo", "-ldflags", `-extldflags "-static"`, "-o", sbxBin, "../cmd/sbx")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build sbx: %v\n%s", err, out)
	}
	return func() { os.RemoveAll(dir) }, nil
}

// result is the outcome of one sbx invocation.
type result struct {
	stdout, stderr string
	code           int
}

// runSbx runs the sbx binary with args and optional stdin, using a private
// runtime root so that tests can check for leftovers.
func runSbx(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	return runCmd(t, exec.Command(sbxBin, args...), stdin)
}

// runCmd runs cmd with optional stdin and collects its output and exit
// code; only a failure to start it fails the test.
func runCmd(t testing.TB, cmd *exec.Cmd, stdin string) result {
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
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// mustRun runs sbx and fails the test unless it exits 0.
func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	r := runSbx(t, "", args...)
	if r.code != 0 {
		t.Fatalf("sbx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// assertNoLeftovers fails if any one-shot run left mounts, cgroups, state
// or processes behind.
func assertNoLeftovers(t testing.TB) {
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
	// The parent cgroup is this test binary's own (TestMain), so every
	// one-shot run's cgroup under it is a leftover of these tests.
	for id, paths := range cgroup.Leftovers() {
		if strings.HasPrefix(id, "run-") {
			t.Errorf("leftover cgroups of %s: %v", id, paths)
		}
	}
}
