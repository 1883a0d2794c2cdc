package pools

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

// TestPoolClaimContainerOptions: docker's container options on a pool
// without a bridge: a create with --add-host claims a member and finds
// its lines in /etc/hosts; --ulimit and --shm-size are fixed at start, so
// a create that sets them starts cold and says which differs.
func TestPoolClaimContainerOptions(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	base := sbx.Options{Rootfs: fixture.CacheDir + "/busybox"}
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "plain", Size: 1, Options: base}); err != nil {
		t.Fatal(err)
	}
	// The server fills the pool in the background; FillPool starts what
	// it has not yet.
	if _, err := e.Host.FillPool(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := e.C.GetPool(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range p.Ready {
			e.See(id)
		}
		if len(p.Ready) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool's member was not ready within 60 s")
		}
	}

	c := base
	c.Hostname, c.ExtraHosts = "claimer", []string{"db:10.1.2.3", "cache:10.1.2.4"}
	sb, err := e.C.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.FromPool != "plain" {
		t.Fatalf("a create with extra hosts was not claimed: %+v", sb.CreateTimings)
	}
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "grep -E 'db|cache|claimer' /etc/hosts"}, nil)
	if err != nil || res.Stdout != "127.0.1.1\tclaimer\n10.1.2.3\tdb\n10.1.2.4\tcache\n" {
		t.Fatalf("/etc/hosts of the claimed sandbox: %+v %v", res, err)
	}

	for field, o := range map[string]sbx.Options{
		"ulimits":        {Ulimits: []sbx.Ulimit{{Name: "nofile", Soft: 100, Hard: 200}}, UserNS: sbx.UserNSHost}, // private ones need CAP_SYS_RESOURCE for ulimits
		"shm_size_bytes": {ShmSizeBytes: 8 << 20},
	} {
		o.Rootfs = base.Rootfs
		cold, err := e.C.Create(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		e.See(cold.ID)
		if cold.FromPool != "" || cold.CreateTimings == nil || !strings.Contains(cold.CreateTimings.Pool, field) {
			t.Errorf("a create with %s: %+v", field, cold.CreateTimings)
		}
		if err := e.C.Remove(ctx, cold.ID, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}
