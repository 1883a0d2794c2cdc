package lifecycle

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// The environment given to create reaches commands but never the command
// line of the sandbox's PID 1, where any host user could read it.
func TestLifecycleEnvNotOnCommandLine(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "-e", "SBX_SECRET=hunter2-token")
	if out := h.Must(t, "exec", id, "--", "sh", "-c", "echo $SBX_SECRET"); out != "hunter2-token\n" {
		t.Fatalf("exec sees %q, want the create-time variable", out)
	}
	sb := h.Inspect(t, id)
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
	h.Must(t, "rm", "-f", id)
}

// The executor runs on one P (GOMAXPROCS=1 in PID 1's own environment,
// read by its Go runtime at start), whatever the sandbox's variables say;
// its commands still get the sandbox's value.
func TestLifecycleExecutorOneP(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "-e", "GOMAXPROCS=3")
	if out := h.Must(t, "exec", id, "--", "sh", "-c", "echo $GOMAXPROCS"); out != "3\n" {
		t.Fatalf("a command sees GOMAXPROCS=%q, want the sandbox's 3", out)
	}
	sb := h.Inspect(t, id)
	if sb.Pid == 0 {
		t.Fatal("inspect shows no PID")
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sb.Pid))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(string(environ), "\x00")
	if !slices.Contains(vars, "GOMAXPROCS=1") || slices.Contains(vars, "GOMAXPROCS=3") {
		t.Fatalf("PID 1's environment %q, want GOMAXPROCS=1 only", vars)
	}
	h.Must(t, "rm", "-f", id)
}

// Under a small memory limit an OOM kill takes the command, not the
// executor: the sandbox keeps answering.
func TestLifecycleOOMSparesExecutor(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "-m", "24m")
	r := h.Sbx(t, "", "exec", id, "--", "awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`)
	if r.Code != 137 {
		t.Fatalf("memory hog: exit %d (%s), want 137", r.Code, r.Stderr)
	}
	if out := h.Must(t, "exec", id, "--", "echo", "alive"); out != "alive\n" {
		t.Fatalf("after the OOM kill: %q", out)
	}
	h.Must(t, "rm", "-f", id)
}
