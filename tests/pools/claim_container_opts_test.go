package pools

import (
	"context"
	"errors"
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
	e.WaitPoolReady(t, "plain", 1)

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

// TestPoolIdleTimeoutStartsCold: an idle timeout cannot be applied to a
// running member (its activity before the claim is not the sandbox's),
// so a create with one starts cold and says why, though a member of its
// key is ready; the same create without it claims that member.
func TestPoolIdleTimeoutStartsCold(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	// Idle checkpoints need a sandbox in the host's user namespace.
	base := sbx.Options{Rootfs: fixture.CacheDir + "/busybox", UserNS: sbx.UserNSHost}
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "hostns", Size: 1, Options: base}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, "hostns", 1)

	idle := base
	idle.IdleTimeout = time.Hour
	cold, err := e.C.Create(ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	e.See(cold.ID)
	if cold.FromPool != "" || cold.CreateTimings == nil || !strings.HasPrefix(cold.CreateTimings.Pool, "miss, ") || !strings.Contains(cold.CreateTimings.Pool, "idle_timeout") {
		t.Errorf("a create with an idle timeout: from pool %q, %+v", cold.FromPool, cold.CreateTimings)
	}
	if _, err := e.Host.Claim(ctx, idle, nil); !errors.Is(err, sandbox.ErrNoMember) || !strings.Contains(err.Error(), "idle_timeout") {
		t.Errorf("Claim with an idle timeout: %v, want ErrNoMember naming idle_timeout", err)
	}
	warm, err := e.C.Create(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	e.See(warm.ID)
	if warm.FromPool != "hostns" {
		t.Errorf("the same create without an idle timeout was not claimed: %+v", warm.CreateTimings)
	}
	for _, id := range []string{cold.ID, warm.ID} {
		if err := e.C.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
}
