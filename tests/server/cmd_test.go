package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerCreateWithCmd checks over raw HTTP that a create's cmd starts
// detached as the sandbox's main command once the sandbox is ready, with
// its arguments intact and in workdir, and that it can be signalled and
// waited for without ending the sandbox.
func TestServerCreateWithCmd(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	data := harness.MustRaw(t, e, 201, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+fixture.CacheDir+`/busybox","workdir":"/tmp","cmd":["sh","-c","echo \"it's $0\" > started; exec sleep 107","a b"]}`))
	reply := harness.DecodeJSON[struct {
		ID       string        `json:"id"`
		Status   string        `json:"status"`
		CmdStart *api.CmdStart `json:"cmd_start"`
	}](t, data)
	e.See(reply.ID)
	if reply.Status != "running" || reply.CmdStart == nil || reply.CmdStart.Status != "running" {
		t.Fatalf("create with cmd: %s", data)
	}
	// The command runs with its arguments intact, in workdir.
	var res execResult
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := e.C.Call(ctx, "POST", client.SandboxPath(reply.ID, "/exec"), map[string]any{"argv": []string{"cat", "/tmp/started"}}, &res); err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || time.Now().After(deadline) {
			break
		}
	}
	if res.Stdout != "it's a b\n" {
		t.Fatalf("cmd output file: %+v", res)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 107") == 1 })
	// Signal it, then wait for it; the sandbox stays.
	harness.MustRaw(t, e, 204, "POST", "/v1/sandboxes/"+reply.ID+"/signal", api.ContentTypeJSON, []byte(`{"signal":"SIGTERM"}`))
	exit := harness.DecodeJSON[sbx.Exit](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+reply.ID+"/wait", "", nil))
	if exit.ExitCode != 143 || exit.Signal != "SIGTERM" || exit.OOMKilled {
		t.Fatalf("wait after SIGTERM: %+v", exit)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 107") == 0 })
	if sb, err := e.C.Get(ctx, reply.ID); err != nil || sb.Status != "running" {
		t.Fatalf("sandbox after its cmd ended: %+v %v", sb, err)
	}
	logs := string(harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+reply.ID+"/logs?since=0", "", nil))
	if !strings.HasPrefix(logs, `{"type":"end","offset":0`) || strings.Count(logs, "\n") != 1 {
		t.Fatalf("logs of a silent command: %q", logs)
	}
	if st, body := harness.RawCall(t, e, "GET", "/v1/sandboxes/"+reply.ID+"/logs?since=-1", "", nil); st != 400 {
		t.Fatalf("logs since=-1: %d %s", st, body)
	}
	if st, body := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+reply.ID+"/signal", api.ContentTypeJSON, []byte(`{}`)); st != 422 && st != 400 {
		t.Fatalf("signal without a signal: %d %s", st, body)
	}
	// A cmd that cannot start (a root without the program) fails the
	// create and leaves no sandbox.
	empty := filepath.Join(e.Dir, "empty-root")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	st, body := harness.RawCall(t, e, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+empty+`","name":"nocmd","cmd":["true"]}`))
	if st != 422 || !strings.Contains(string(body), "cannot start") {
		t.Fatalf("cmd that is not in the root: %d %s", st, body)
	}
	if list, _ := e.Host.List(ctx, sbx.Filter{}); len(list) != 1 {
		t.Fatalf("after a failed cmd start, %d sandboxes exist, want 1", len(list))
	}
	t.Logf("failed create: %d %s", st, body)
	if !strings.Contains(string(body), "error") {
		t.Fatalf("failed create: %s", body)
	}
}
