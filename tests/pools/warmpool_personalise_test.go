package pools

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// listenInNS listens on addr (TCP) inside the network namespace at
// nsPath and answers every connection with body; it stops with the test.
func listenInNS(t *testing.T, nsPath, addr, body string) {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // left to die: it changed namespace
		f, err := os.Open(nsPath)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, nsPath, r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(body))
			c.Close()
		}
	}()
}

// TestServerWarmPoolPersonalisesNetwork: over REST, a claim from a
// bridged pool gets the create's hostname, extra /etc/hosts lines, name
// server, egress policy and allowed host port, proven from inside the sandbox (a host service on
// the allowed port answers, resolv.conf and hostname are the create's);
// the next claimant of the same pool, asking for none of it, reaches no
// host port; a create the pool cannot serve says why in its reply.
func TestServerWarmPoolPersonalisesNetwork(t *testing.T) {
	fixture.BusyboxRootfs(t)
	nsName := harness.HostNS(t)
	hostNS := "/run/netns/" + nsName
	// The sandbox may reach a port of the (stand-in) host: the server's
	// policy must allow it.
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: hostNS,
		Policy: &sbx.Policy{AllowedHostDirs: []string{fixture.CacheDir}, AllowHostNetwork: true}}, nil)
	ctx := context.Background()
	base := sbx.Options{Rootfs: fixture.CacheDir + "/busybox", Network: sbx.NetworkBridge}
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "net", Size: 2, Options: base}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, "net", 2)
	const port = 18765
	listenInNS(t, hostNS, fmt.Sprintf("0.0.0.0:%d", port), "host-service")

	c := base
	c.Hostname, c.DNS, c.Egress = "claimed-net", []string{"192.0.2.53"}, "none"
	c.AllowHostPorts = []string{fmt.Sprint(port)}
	c.ExtraHosts = []string{"db.internal:10.9.8.7"}
	sb, err := e.C.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.FromPool != "net" || sb.CreateTimings == nil || sb.CreateTimings.Pool != "hit, net" {
		t.Fatalf("claim over REST: %+v", sb)
	}
	if sb.Network == nil || sb.Network.Egress.Kind != "none" || len(sb.Network.AllowHostPorts) != 1 || len(sb.Network.DNS) != 1 {
		t.Fatalf("the claimed sandbox's network: %+v", sb.Network)
	}
	script := fmt.Sprintf("hostname; cat /etc/resolv.conf; grep -c claimed-net /etc/hosts; grep db.internal /etc/hosts; nc -w 3 %s %d </dev/null || echo unreachable", sb.Network.Gateway, port)
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: script}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"claimed-net\n", "nameserver 192.0.2.53", "host-service", "10.9.8.7\tdb.internal\n"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("inside the claimed sandbox: missing %q in:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
	// The pool's other member, claimed plain: the host port is shut.
	plain, err := e.C.Create(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	e.See(plain.ID)
	if plain.FromPool != "net" || plain.ID == sb.ID {
		t.Fatalf("second claim: %+v", plain)
	}
	res, err = e.C.Exec(ctx, plain.ID, sbx.ExecRequest{Command: fmt.Sprintf("hostname; nc -w 2 %s %d </dev/null || echo unreachable", plain.Network.Gateway, port)}, nil)
	if err != nil || !strings.Contains(res.Stdout, "unreachable") || strings.Contains(res.Stdout, "host-service") || strings.Contains(res.Stdout, "claimed-net") {
		t.Errorf("the next claimant reaches the first one's host port or name: %+v, %v", res, err)
	}
	// A create the pool cannot serve: cold, and the reply says why.
	other := base
	other.ReadonlyRootfs = true
	cold, err := e.C.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	e.See(cold.ID)
	if cold.FromPool != "" || cold.CreateTimings == nil || cold.CreateTimings.Pool != "miss, pool net: readonly_rootfs differs" {
		t.Fatalf("a create the pool cannot serve: %+v", cold.CreateTimings)
	}
	for _, id := range []string{sb.ID, plain.ID, cold.ID} {
		if err := e.C.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Host.RemovePool(ctx, "net"); err != nil {
		t.Fatal(err)
	}
	if left := harness.BridgeLeftovers(t, e.Root, e.RunRoot, nsName); len(left) > 0 {
		t.Errorf("left behind after removing the claimed sandboxes: %v", left)
	}
}
