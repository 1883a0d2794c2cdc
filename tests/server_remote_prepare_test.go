package tests

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestServerRemotePrepare runs `sbx prepare --host` against `sbx serve`:
// the image is built once on the server (the second call finds it), runs
// there, carries the same cache key as a local prepare of the same base
// and script, and the build sandbox is gone. Options the server's prepare
// does not take, and host networking the server does not allow, are
// refused.
func TestServerRemotePrepare(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := newServeDirs(t)
	p.start(t)
	defer p.stop(t)
	t.Setenv("SBX_TOKEN", serverTestToken)
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
	cli := func(args ...string) result {
		return runSbx(t, "", append(append(append([]string{}, localArgs...), "--host", "unix://"+p.sock), args...)...)
	}
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "remote/prep:1", fixture.BusyboxImage(t))
	if r := cli("pull", ref); r.code != 0 {
		t.Fatalf("remote pull: %d %s", r.code, r.stderr)
	}
	script := `echo "built $GREETING"; echo "$GREETING $(pwd)" > /prepared`
	prep := []string{"prepare", ref, "-c", script, "-e", "GREETING=hi", "-w", "/tmp"}
	r := cli(prep...)
	name := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(name, "sbx-prepared:") || !strings.Contains(r.stderr, "built hi") {
		t.Fatalf("remote prepare: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r = cli(prep...); r.code != 0 || strings.TrimSpace(r.stdout) != name || !strings.Contains(r.stderr, "found in the cache") || strings.Contains(r.stderr, "built") {
		t.Fatalf("second remote prepare: %d %q %q (first: %s)", r.code, r.stdout, r.stderr, name)
	}
	if r = cli("run", name, "cat", "/prepared"); r.code != 0 || r.stdout != "hi /tmp\n" {
		t.Fatalf("run of the prepared image: %d %q %s", r.code, r.stdout, r.stderr)
	}
	list, err := p.client(t).List(context.Background(), sbx.Filter{})
	if err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the prepares: %v %+v", err, list)
	}
	// A local prepare of the same base and script: the same name.
	if lr := runSbx(t, "", append(localArgs, "pull", ref)...); lr.code != 0 {
		t.Fatalf("local pull: %d %s", lr.code, lr.stderr)
	}
	if lr := runSbx(t, "", append(localArgs, prep...)...); lr.code != 0 || strings.TrimSpace(lr.stdout) != name {
		t.Fatalf("local prepare: %d %q (remote: %s) %s", lr.code, lr.stdout, name, lr.stderr)
	}
	if lr := runSbx(t, "", append(localArgs, "ps", "-a", "-q")...); lr.code != 0 || lr.stdout != "" {
		t.Fatalf("local sandboxes left after the local prepare: %d %q %s", lr.code, lr.stdout, lr.stderr)
	}

	// Every sandbox flag reaches the server (limits do not change the key).
	if r = cli("prepare", ref, "-c", "true", "--memory", "64m"); r.code != 0 || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("remote prepare with --memory: %d %s", r.code, r.stderr)
	}
	// Refusals.
	if r = cli("prepare", ref, "-c", "true", "--network", "host"); r.code == 0 {
		t.Fatalf("remote prepare with host networking the server does not allow succeeded: %s", r.stdout)
	}
	if r = cli("prepare", reg.Host+"/remote/nosuch:1", "-c", "true"); r.code == 0 {
		t.Fatalf("remote prepare of an unknown base succeeded: %s", r.stdout)
	}
	if list, err = p.client(t).List(context.Background(), sbx.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the refusals: %v %+v", err, list)
	}
}
