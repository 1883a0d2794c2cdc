package server

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerRemotePrepare runs `sbx prepare --host` against `sbx serve`:
// the image is built once on the server (the second call finds it), runs
// there, carries the same cache key as a local prepare of the same base
// and script, and the build sandbox is gone. Options the server's prepare
// does not take, and host networking the server does not allow, are
// refused.
func TestServerRemotePrepare(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	local, err := os.MkdirTemp("", "sbxl") // short: executor socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(local) })
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(local, 0o711); err != nil {
		t.Fatal(err)
	}
	localArgs := []string{"--root", local + "/root", "--run-root", local + "/run"}
	cli := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append(append(append([]string{}, localArgs...), "--host", "unix://"+p.Sock), args...)...)
	}
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "remote/prep:1", fixture.BusyboxImage(t))
	if r := cli("pull", ref); r.Code != 0 {
		t.Fatalf("remote pull: %d %s", r.Code, r.Stderr)
	}
	script := `echo "built $GREETING"; echo "$GREETING $(pwd)" > /prepared`
	prep := []string{"prepare", ref, "-c", script, "-e", "GREETING=hi", "-w", "/tmp"}
	r := cli(prep...)
	name := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || !strings.HasPrefix(name, "sbx-prepared:") || !strings.Contains(r.Stderr, "built hi") {
		t.Fatalf("remote prepare: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r = cli(prep...); r.Code != 0 || strings.TrimSpace(r.Stdout) != name || !strings.Contains(r.Stderr, "found in the cache") || strings.Contains(r.Stderr, "built") {
		t.Fatalf("second remote prepare: %d %q %q (first: %s)", r.Code, r.Stdout, r.Stderr, name)
	}
	if r = cli("run", name, "cat", "/prepared"); r.Code != 0 || r.Stdout != "hi /tmp\n" {
		t.Fatalf("run of the prepared image: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	list, err := p.Client(t).List(context.Background(), sbx.Filter{})
	if err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the prepares: %v %+v", err, list)
	}
	// A local prepare of the same base and script: the same name.
	if lr := harness.RunSbx(t, "", append(localArgs, "pull", ref)...); lr.Code != 0 {
		t.Fatalf("local pull: %d %s", lr.Code, lr.Stderr)
	}
	if lr := harness.RunSbx(t, "", append(localArgs, prep...)...); lr.Code != 0 || strings.TrimSpace(lr.Stdout) != name {
		t.Fatalf("local prepare: %d %q (remote: %s) %s", lr.Code, lr.Stdout, name, lr.Stderr)
	}
	if lr := harness.RunSbx(t, "", append(localArgs, "ps", "-a", "-q")...); lr.Code != 0 || lr.Stdout != "" {
		t.Fatalf("local sandboxes left after the local prepare: %d %q %s", lr.Code, lr.Stdout, lr.Stderr)
	}

	// Every sandbox flag reaches the server (limits do not change the key).
	if r = cli("prepare", ref, "-c", "true", "--memory", "64m"); r.Code != 0 || strings.TrimSpace(r.Stdout) == "" {
		t.Fatalf("remote prepare with --memory: %d %s", r.Code, r.Stderr)
	}
	// Refusals.
	if r = cli("prepare", ref, "-c", "true", "--network", "host"); r.Code == 0 {
		t.Fatalf("remote prepare with host networking the server does not allow succeeded: %s", r.Stdout)
	}
	if r = cli("prepare", reg.Host+"/remote/nosuch:1", "-c", "true"); r.Code == 0 {
		t.Fatalf("remote prepare of an unknown base succeeded: %s", r.Stdout)
	}
	if list, err = p.Client(t).List(context.Background(), sbx.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the refusals: %v %+v", err, list)
	}
}
