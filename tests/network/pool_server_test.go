package network

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerNetworkPool checks that a server with a network pool fills it
// at start, hands a bridged create a pooled namespace (create timings say
// so), refills it and drains it when the host closes; and that the Host's Subnet is
// used.
func TestServerNetworkPool(t *testing.T) {
	fixture.BusyboxRootfs(t)
	hostNS := "/run/netns/" + harness.HostNS(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: hostNS, Subnet: netip.MustParsePrefix("10.66.0.0/16"), NetworkPool: 2}, nil)
	waitPooled := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			n, err := e.Host.PreparedNetworks()
			if err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool holds %d namespaces, want %d", n, want)
			}
		}
	}
	waitPooled(2)
	data := harness.MustRaw(t, e, 201, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+fixture.CacheDir+`/busybox","network":"bridge"}`))
	sb := harness.DecodeJSON[sbx.Sandbox](t, data)
	e.See(sb.ID)
	if sb.CreateTimings == nil || !sb.CreateTimings.FromPool || sb.CreateTimings.NetworkS <= 0 || !strings.Contains(string(data), `"network_s"`) {
		t.Fatalf("create timings lack the pooled network step: %s", data)
	}
	if sb.Network == nil || !netip.MustParsePrefix("10.66.0.0/16").Contains(sb.Network.IP) {
		t.Fatalf("sandbox address outside the configured subnet 10.66.0.0/16: %s", data)
	}
	waitPooled(2) // refilled in the background
	if err := e.C.Remove(context.Background(), sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	e.Srv.Shutdown()
	e.Srv.Close()
	_ = e.Host.Close()
	if n, err := e.Host.PreparedNetworks(); err != nil || n != 0 {
		t.Fatalf("pool after Close: %d %v, want drained", n, err)
	}
}
