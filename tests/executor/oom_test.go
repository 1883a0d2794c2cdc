package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// memoryHog grows a string until the sandbox's memory limit stops it.
var memoryHog = []string{"awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`}

// An exec killed by the kernel's OOM killer says so: through the library
// (from the host's cgroup), the REST client (from the executor), and the
// CLI against local state and against the server (a note on stderr beside
// exit code 137). A command killed with SIGKILL otherwise is not OOM-killed.
func TestExecReportsOOMKill(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	o := harness.BusyboxCreate("")
	o.Limits.MemoryBytes = 24 << 20
	sb, err := e.C.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	for name, b := range map[string]sbx.Sandboxes{"library": e.Host, "REST client": e.C} {
		res, err := b.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: memoryHog, Timeout: time.Minute}, nil)
		if err != nil || !res.OOMKilled || res.Signal != "SIGKILL" || res.ExitCode != 137 || res.TimedOut {
			t.Errorf("%s: exec of the memory hog: %+v, %v; want OOM-killed", name, res, err)
		}
		streamed, err := b.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: memoryHog, Timeout: time.Minute}, func(sbx.ExecFrame) error { return nil })
		if err != nil || !streamed.OOMKilled {
			t.Errorf("%s: streamed exec of the memory hog: %+v, %v; want OOM-killed", name, streamed, err)
		}
		res, err = b.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "kill -9 $$"}, nil)
		if err != nil || res.OOMKilled || res.Signal != "SIGKILL" {
			t.Errorf("%s: exec killed with SIGKILL: %+v, %v; want not OOM-killed", name, res, err)
		}
	}
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	for name, where := range map[string][]string{
		"local":  {"--root", e.Root, "--run-root", e.RunRoot},
		"remote": {"--host", e.URL},
	} {
		r := harness.RunSbx(t, "", append(where, append([]string{"exec", sb.ID, "--"}, memoryHog...)...)...)
		if r.Code != 137 || !strings.Contains(r.Stderr, "killed for lack of memory (OOM)") {
			t.Errorf("%s sbx exec of the memory hog: exit %d, stderr %q", name, r.Code, r.Stderr)
		}
		r = harness.RunSbx(t, "", append(where, "exec", sb.ID, "--", "sh", "-c", "kill -9 $$")...)
		if r.Code != 137 || strings.Contains(r.Stderr, "OOM") {
			t.Errorf("%s sbx exec killed with SIGKILL: exit %d, stderr %q", name, r.Code, r.Stderr)
		}
	}
}
