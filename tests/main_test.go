package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
)

// sbxBin is the statically linked sbx binary under test: $SBX_BIN (set by
// `make test`), or one built into a temporary directory.
var sbxBin string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "tests: the integration tests need root (run `make test` as root)")
		os.Exit(1)
	}
	cleanup, err := findSbx()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	// The parent cgroup goes when no sandbox is left in it.
	_ = cgroup.RemoveParentIfEmpty()
	os.Exit(code)
}

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
	cmd := exec.Command(sbxBin, args...)
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
			t.Fatalf("run sbx %v: %v", args, err)
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
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, "/run/sbx/runs/") {
			t.Errorf("leftover mount: %s", line)
		}
	}
	if entries, _ := os.ReadDir("/run/sbx/runs"); len(entries) > 0 {
		t.Errorf("leftover run directories: %d in /run/sbx/runs", len(entries))
	}
	if entries, _ := os.ReadDir("/run/sbx/containers"); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "run-") {
				t.Errorf("leftover container state: %s", e.Name())
			}
		}
	}
	for id, paths := range cgroup.Leftovers() {
		if strings.HasPrefix(id, "run-") {
			t.Errorf("leftover cgroups of %s: %v", id, paths)
		}
	}
}
