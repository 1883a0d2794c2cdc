package pools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerWarmPool: a pool defined over REST is filled by the server in
// the background, a create through the client claims a member with the
// create's env, the server refills, and rm leaves only the claimed
// sandbox.
func TestServerWarmPool(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	base := sbx.Options{Rootfs: fixture.CacheDir + "/busybox"}
	if _, err := e.C.CreatePool(ctx, sbx.PoolSpec{Name: "rest", Size: 2, Options: base}); err != nil {
		t.Fatal(err)
	}
	bad := sbx.PoolSpec{Name: "bad", Size: 1, Options: base}
	bad.Options.Name = "x"
	if _, err := e.C.CreatePool(ctx, bad); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("pool options with a name: got %v, want sbx.ErrInvalid", err)
	}
	waitReady := func(want int) *sbx.Pool {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			p, err := e.C.GetPool(ctx, "rest")
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range p.Ready {
				e.See(id)
			}
			if len(p.Ready) == want {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server filled %d of %d members within 60 s", len(p.Ready), want)
			}
		}
	}
	p := waitReady(2)
	if list, _ := e.C.List(ctx, sbx.Filter{}); len(list) != 0 {
		t.Fatalf("GET /v1/sandboxes lists %d idle members", len(list))
	}
	if list, _ := e.C.List(ctx, sbx.Filter{Pooled: true}); len(list) != 2 {
		t.Fatalf("GET /v1/sandboxes?pooled=true lists %d members, want 2", len(list))
	}
	o := base
	o.Env = []string{"JOB=17"}
	sb, err := e.C.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if sb.FromPool != "rest" || (sb.ID != p.Ready[0] && sb.ID != p.Ready[1]) {
		t.Fatalf("create did not claim a member of %v: from %q, id %s", p.Ready, sb.FromPool, sb.ID)
	}
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"sh", "-c", "echo $JOB"}}, nil)
	if err != nil || strings.TrimSpace(res.Stdout) != "17" {
		t.Fatalf("env of the claimed sandbox: %+v, %v", res, err)
	}
	waitReady(2)
	if pools, err := e.C.ListPools(ctx); err != nil || len(pools) != 1 || pools[0].Key == "" {
		t.Fatalf("list pools: %+v, %v", pools, err)
	}
	rep, err := e.C.RemovePool(ctx, "rest")
	if err != nil || len(rep.Removed) < 2 {
		t.Fatalf("remove pool: %+v, %v", rep, err)
	}
	if list, _ := e.C.List(ctx, sbx.Filter{Pooled: true}); len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("after pool rm: %d sandboxes, want only the claimed one", len(list))
	}
	if _, err := e.C.GetPool(ctx, "rest"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("removed pool: got %v, want sbx.ErrNotFound", err)
	}
}

// TestServerWarmPoolPublish: a claim from a bridged pool publishes the
// create's port on the member's network, traffic reaches the sandbox
// through it, and removing the sandbox takes the rules away.
func TestServerWarmPoolPublish(t *testing.T) {
	fixture.BusyboxRootfs(t)
	hostNS := "/run/netns/" + harness.HostNS(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: hostNS}, nil)
	ctx := context.Background()
	base := sbx.Options{Rootfs: fixture.CacheDir + "/busybox", Network: sbx.NetworkBridge}
	withPort := base
	withPort.Publish = []string{"127.0.0.1:0:8080"}
	if _, err := e.C.CreatePool(ctx, sbx.PoolSpec{Name: "net", Size: 1, Options: withPort}); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("a pool that publishes: got %v, want sbx.ErrInvalid", err)
	}
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "net", Size: 1, Options: base}); err != nil {
		t.Fatal(err)
	}
	member := e.WaitPoolReady(t, "net", 1)[0]
	sb, err := e.C.Create(ctx, withPort)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.ID != member || sb.Network == nil || len(sb.Network.Ports) != 1 || sb.Network.Ports[0].HostPort == 0 {
		t.Fatalf("claim with a published port: %+v (member %s)", sb.Network, member)
	}
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "mkdir -p /tmp/www && echo pooled > /tmp/www/index.html && httpd -p 8080 -h /tmp/www"}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start httpd: %+v %v", res, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", sb.Network.Ports[0].HostPort)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := harness.HTTPClientInNS(t, hostNS).Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "pooled\n" {
				t.Fatalf("published port answered %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("published port %s: %v", url, err)
		}
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.HTTPClientInNS(t, hostNS).Get(url); err == nil {
		t.Fatalf("%s still answers after the sandbox was removed", url)
	}
}
