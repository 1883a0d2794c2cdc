package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxrun/sbx"
)

// sandbox.Open as a user other than root fails at once, saying that root
// is needed (instead of failing later at a mount or a cgroup).
func TestOpenNeedsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		_, err := Open(HostConfig{Root: t.TempDir(), RunRoot: t.TempDir()})
		if err == nil || !errors.Is(err, sbx.ErrForbidden) || !strings.Contains(err.Error(), "needs root") {
			t.Fatalf("Open as uid %d: %v", os.Geteuid(), err)
		}
		return
	}
	// As root: run this test again as nobody, from a copy of the test
	// binary that nobody may execute.
	dir, err := os.MkdirTemp("", "sbx-open")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := dir + "/sandbox.test"
	if out, err := exec.Command("cp", os.Args[0], bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the test binary: %v %s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestOpenNeedsRoot$", "-test.count=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "TMPDIR=/tmp")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("TestOpenNeedsRoot as nobody: %v\n%s", err, out)
	}
}
