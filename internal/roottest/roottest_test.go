package roottest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequire runs a test that requires root in a child process: under
// -short it is skipped for everyone; without it, it runs as root and fails
// as any other user, saying to run it as root.
func TestRequire(t *testing.T) {
	if os.Getenv("ROOTTEST_CHILD") == "1" {
		Require(t, "it needs it")
		t.Log("ran")
		return
	}
	for _, short := range []bool{true, false} {
		args := []string{"-test.run=^TestRequire$", "-test.v"}
		if short {
			args = append(args, "-test.short")
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "ROOTTEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		s := string(out)
		switch {
		case short:
			if err != nil || !strings.Contains(s, "SKIP") || !strings.Contains(s, "needs root (it needs it): make test runs it") {
				t.Errorf("-short: %v\n%s", err, s)
			}
		case os.Geteuid() == 0:
			if err != nil || !strings.Contains(s, "ran") {
				t.Errorf("as root: %v\n%s", err, s)
			}
		default:
			if err == nil || !strings.Contains(s, "this test needs root (it needs it)") {
				t.Errorf("as a user without -short: %v\n%s", err, s)
			}
		}
	}
}
