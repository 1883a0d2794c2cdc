package tests

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The environment given to create reaches commands but never the command
// line of the sandbox's PID 1, where any host user could read it.
func TestLifecycleEnvNotOnCommandLine(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t, "-e", "SBX_SECRET=hunter2-token")
	if out := h.must(t, "exec", id, "--", "sh", "-c", "echo $SBX_SECRET"); out != "hunter2-token\n" {
		t.Fatalf("exec sees %q, want the create-time variable", out)
	}
	sb := h.inspect(t, id)
	if sb.Pid == 0 {
		t.Fatal("inspect shows no PID")
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sb.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), "hunter2") {
		t.Fatalf("the secret is on PID 1's command line: %q", cmdline)
	}
	h.must(t, "rm", "-f", id)
}
