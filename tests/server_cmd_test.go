package tests

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
)

// TestServerCreateWithCmd checks that a create's cmd starts detached in a
// shell session once the sandbox is ready, and can be followed and ended
// through that session without ending the sandbox.
func TestServerCreateWithCmd(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := newServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	data := mustRaw(t, e, 201, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+fixture.CacheDir+`/busybox","workdir":"/tmp","cmd":["sh","-c","echo \"it's $0\" > started; sleep 107","a b"]}`))
	reply := decode[struct {
		ID       string        `json:"id"`
		Status   string        `json:"status"`
		CmdStart *api.CmdStart `json:"cmd_start"`
	}](t, data)
	e.see(reply.ID)
	if reply.Status != "running" || reply.CmdStart == nil || reply.CmdStart.Session == "" || reply.CmdStart.Status != "running" {
		t.Fatalf("create with cmd: %s", data)
	}
	// The command runs with its arguments intact, in workdir.
	var res execResult
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := e.c.Call(ctx, "POST", client.SandboxPath(reply.ID, "/exec"), map[string]any{"argv": []string{"cat", "/tmp/started"}}, &res); err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || time.Now().After(deadline) {
			break
		}
	}
	if res.Stdout != "it's a b\n" {
		t.Fatalf("cmd output file: %+v", res)
	}
	if countHostProcesses(t, "sleep 107") != 1 {
		t.Fatal("the cmd's process is not running")
	}
	// Interrupt it through its session; the sandbox stays.
	var run struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
	}
	path := client.SandboxPath(reply.ID, "/sessions/"+reply.CmdStart.Session+"/run")
	if err := e.c.Call(ctx, "POST", path, map[string]any{"command": "C-c", "is_input": true, "timeout_s": 10}, &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != "completed" {
		t.Fatalf("after C-c: %+v", run)
	}
	waitFor(t, func() bool { return countHostProcesses(t, "sleep 107") == 0 })
	if sb, err := e.c.Get(ctx, reply.ID); err != nil || sb.Status != "running" {
		t.Fatalf("sandbox after its cmd ended: %+v %v", sb, err)
	}
	// A cmd that cannot start (a root without a shell) fails the create
	// and leaves no sandbox.
	empty := filepath.Join(e.dir, "empty-root")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	st, body := rawCall(t, e, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+empty+`","name":"nocmd","cmd":["true"]}`))
	if st != 422 || !strings.Contains(string(body), "start cmd") {
		t.Fatalf("cmd as an unknown user: %d %s", st, body)
	}
	if list, _ := e.host.List(ctx, sbx.Filter{}); len(list) != 1 {
		t.Fatalf("after a failed cmd start, %d sandboxes exist, want 1", len(list))
	}
	t.Logf("failed create: %d %s", st, body)
	if !strings.Contains(string(body), "error") {
		t.Fatalf("failed create: %s", body)
	}
}
