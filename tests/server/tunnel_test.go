package server

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerExecutorClientRemote uses the executor's own typed client
// through the server's tunnel: the remote API is the host API.
func TestServerExecutorClientRemote(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	sb, err := e.C.Create(ctx, harness.BusyboxCreate("tun"))
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	ex := e.C.Executor("tun", execclient.Options{})
	defer ex.Close()
	if h, err := ex.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health: %+v %v", h, err)
	}
	res, err := ex.Exec(ctx, execapi.ExecRequest{Command: "echo $((6*7))"})
	if err != nil || res.Stdout != "42\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	var out strings.Builder
	res, err = ex.ExecStream(ctx, execapi.ExecRequest{Argv: []string{"sh", "-c", "echo a; echo b >&2; exit 4"}}, func(f execapi.ExecFrame) error {
		out.WriteString(f.Type + ":" + f.Data)
		return nil
	})
	if err != nil || res.ExitCode != 4 || !strings.Contains(out.String(), "stdout:a\n") || !strings.Contains(out.String(), "stderr:b\n") {
		t.Fatalf("streamed exec: %+v %q %v", res, out.String(), err)
	}
	sess, err := ex.CreateSession(ctx, execapi.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Run(ctx, sess.ID, execapi.RunRequest{Command: "cd /tmp; export V=ok"}); err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(ctx, sess.ID, execapi.RunRequest{Command: "echo $V $PWD"})
	if err != nil || run.Status != execapi.StatusCompleted || run.Output != "ok /tmp\n" {
		t.Fatalf("session: %+v %v", run, err)
	}
	if _, err := ex.WriteFile(ctx, "/tmp/t.txt", strings.NewReader("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldStr, newStr := "two", "three"
	if _, err := ex.Edit(ctx, execapi.EditRequest{Command: execapi.EditStrReplace, Path: "/tmp/t.txt", OldStr: &oldStr, NewStr: &newStr}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ex.ReadFile(ctx, "/tmp/t.txt", &buf, 1<<20); err != nil || buf.String() != "one\nthree\n" {
		t.Fatalf("read: %q %v", buf.String(), err)
	}
	if l, err := ex.List(ctx, "/tmp"); err != nil || len(l.Entries) == 0 {
		t.Fatalf("list: %+v %v", l, err)
	}
	var tarball bytes.Buffer
	if _, err := ex.GetArchive(ctx, "/tmp/t.txt", &tarball, 1<<20); err != nil || tarball.Len() == 0 {
		t.Fatalf("get archive: %v", err)
	}
	if _, err := ex.PutArchive(ctx, "/tmp/copy", &tarball); err != nil {
		t.Fatal(err)
	}
	res, _ = ex.Exec(ctx, execapi.ExecRequest{Command: "cat /tmp/copy/t.txt"})
	if res.Stdout != "one\nthree\n" {
		t.Fatalf("archive round trip: %q", res.Stdout)
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Exec(ctx, execapi.ExecRequest{Command: "true"}); err == nil {
		t.Fatal("exec through a tunnel to a removed sandbox succeeded")
	}
}
