package netns

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestReconfigureReplacesTheRules: a sandbox attached with the default
// policy (a warm pool's member) gets an allow-list, a name server and an
// allowed host port at claim; what the old policy allowed is blocked
// after, what the new one allows answers, and detach leaves nothing.
func TestReconfigureReplacesTheRules(t *testing.T) {
	e := newTestEnv(t)
	e.attach("sb-other", AttachOptions{})
	before := e.leftovers()
	a := e.attach("sb-member", AttachOptions{Hostname: "member"})
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
	e.expectBlocked(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort))

	got, err := e.net.Reconfigure(context.Background(), "sb-member", AttachOptions{Mode: ModeBridge,
		Egress: mustEgress(t, "192.168.77.0/24"), DNS: []netip.Addr{netip.MustParseAddr(privateDNSIP)},
		AllowHostPorts: []HostPort{{Port: hostSvcPort, Proto: TCP}}, Hostname: "claimed"})
	must(t, err)
	if got.ResolvConf != "nameserver "+privateDNSIP+"\n" || !strings.Contains(got.Hosts, "claimed") {
		t.Fatalf("resolv.conf %q, hosts %q", got.ResolvConf, got.Hosts)
	}
	if got.Egress.Kind != EgressAllowList || len(got.AllowHostPorts) != 1 {
		t.Fatalf("attachment after reconfigure: %+v", got)
	}
	e.expectBlocked(a.NetNSPath, webIP+":80")
	e.expectGet(a.NetNSPath, privateIP+":80", "private")
	e.expectGet(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort), "host")
	if ans, err := udpAskUntilAnswered(a.NetNSPath, privateDNSIP+":53", "q"); err != nil || ans != "echo:q" {
		t.Fatalf("the new name server: %q, %v", ans, err)
	}
	// The lease holds the new settings (Lookup reads it).
	l, err := e.net.Lookup("sb-member")
	must(t, err)
	if l.Egress.Kind != EgressAllowList || len(l.DNS) != 1 || !strings.Contains(l.Hosts, "claimed") {
		t.Fatalf("lease after reconfigure: %+v", l)
	}
	if _, err := e.net.Reconfigure(context.Background(), "sb-nobody", AttachOptions{Mode: ModeBridge}); err == nil {
		t.Fatal("reconfigured a sandbox without a network")
	}
	must(t, e.net.Detach(context.Background(), "sb-member"))
	if after := e.leftovers(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("left behind:\n%v\nbefore:\n%v", after, before)
	}
}
