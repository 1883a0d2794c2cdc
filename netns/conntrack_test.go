package netns

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// udpFlow is a conntrack entry of a UDP flow, original and reply direction.
func udpFlow(src string, sport uint16, dst string, dport uint16, rsrc string, rsport uint16, rdst string, rdport uint16) *netlink.ConntrackFlow {
	return &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(src).To4(), SrcPort: sport, DstIP: net.ParseIP(dst).To4(), DstPort: dport},
		Reverse:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(rsrc).To4(), SrcPort: rsport, DstIP: net.ParseIP(rdst).To4(), DstPort: rdport},
		TimeOut:    600,
	}
}

// conntrackOf opens a conntrack handle in the namespace at path.
func conntrackOf(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(vnetns.NsHandle(openNS(t, path)), unix.NETLINK_NETFILTER)
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

// flowsWith lists the entries of h whose original or reply source is ip.
func flowsWith(t *testing.T, h *netlink.Handle, ip string) []string {
	t.Helper()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	must(t, err)
	var out []string
	for _, f := range flows {
		if f.Forward.SrcIP.String() == ip || f.Reverse.SrcIP.String() == ip {
			out = append(out, f.String())
		}
	}
	return out
}

// A detach deletes the sandbox's conntrack entries, both its own
// connections and those to it through a published port, and nothing
// else; and the work it takes does not grow with the host's table.
func TestDetachForgetsOnlyTheSandboxConnections(t *testing.T) {
	e := newTestEnv(t)
	a, err := e.net.Attach(context.Background(), "ct", AttachOptions{Mode: ModeBridge})
	must(t, err)
	sbx := a.IP.String()
	ct := conntrackOf(t, e.hostNS)
	// Other flows of the host: some to the host itself, and as many as a
	// busy host has.
	const others = 2000
	for i := range others {
		port := uint16(20000 + i)
		must(t, ct.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET,
			udpFlow(webIP, port, hostUplinkIP, 9999, hostUplinkIP, 9999, webIP, port)))
	}
	for _, f := range []*netlink.ConntrackFlow{
		// The sandbox's own connection out, masqueraded.
		udpFlow(sbx, 40000, webIP, 53, webIP, 53, hostUplinkIP, 40000),
		// A connection to the sandbox through a published port.
		udpFlow(webIP, 41000, hostUplinkIP, 5300, sbx, 53, webIP, 41000),
	} {
		must(t, ct.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, f))
	}
	if got := flowsWith(t, ct, sbx); len(got) != 2 {
		t.Fatalf("the sandbox's entries before the detach: %q, want 2", got)
	}

	// Forgetting an address with no entries reads none of the others: its
	// allocations are a few (45 here), not some per entry in the table
	// (about 65 each when the table is read); the bound leaves room for
	// whatever else of the process allocates meanwhile.
	absent := netip.MustParseAddr("10.254.254.254")
	allocs := testing.AllocsPerRun(3, func() {
		if err := e.net.forgetConnections(absent); err != nil {
			t.Errorf("forget the connections of %s: %v", absent, err)
		}
	})
	if allocs > others/2 {
		t.Errorf("forgetting one address's connections made %.0f allocations with %d other entries in the table: it reads the table", allocs, others)
	}

	must(t, e.net.Detach(context.Background(), "ct"))
	if got := flowsWith(t, ct, sbx); len(got) != 0 {
		t.Errorf("entries of the removed sandbox left: %q", got)
	}
	if got := flowsWith(t, ct, webIP); len(got) != others {
		t.Errorf("%d entries of other flows left after the detach, want all %d", len(got), others)
	}
}

// Kernels without a filtered flush get the dump, which deletes the same.
func TestForgetConnectionsByDump(t *testing.T) {
	e := newTestEnv(t)
	ct := conntrackOf(t, e.hostNS)
	const sbx = "10.99.0.7"
	for _, f := range []*netlink.ConntrackFlow{
		udpFlow(sbx, 40000, webIP, 53, webIP, 53, hostUplinkIP, 40000),
		udpFlow(webIP, 41000, hostUplinkIP, 5300, sbx, 53, webIP, 41000),
		udpFlow(webIP, 42000, hostUplinkIP, 9999, hostUplinkIP, 9999, webIP, 42000),
	} {
		must(t, ct.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, f))
	}
	must(t, e.net.forgetConnectionsByDump(netip.MustParseAddr(sbx)))
	if got := flowsWith(t, ct, sbx); len(got) != 0 {
		t.Errorf("entries of %s left: %q", sbx, got)
	}
	if got := flowsWith(t, ct, webIP); len(got) != 1 {
		t.Errorf("other flows left: %q, want the one", got)
	}
}
