package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
)

func TestBridgeEgressPolicy(t *testing.T) {
	e := newTestEnv(t)
	web := webIP + ":80"
	a := e.attach("sb-default", AttachOptions{Hostname: "box1"})
	b := e.attach("sb-other", AttachOptions{})
	if !a.IP.IsValid() || a.Gateway != netip.MustParseAddr("10.88.0.1") || a.NetNSPath == "" {
		t.Fatalf("attachment lacks address or namespace: %+v", a)
	}
	if !strings.Contains(a.Hosts, a.IP.String()+"\tbox1") {
		t.Errorf("hosts file lacks the sandbox name: %q", a.Hosts)
	}
	if strings.Contains(a.ResolvConf, "127.0.0.53") || !strings.Contains(a.ResolvConf, "nameserver "+privateDNSIP) || !strings.Contains(a.ResolvConf, "search example.test") {
		t.Errorf("resolv.conf should carry the host's non-loopback servers and search: %q", a.ResolvConf)
	}
	e.serveHTTP(b.NetNSPath, "0.0.0.0:80", "sandbox-b")

	// To the internet through NAT (the internet has no route to 10.88/16).
	e.expectGet(a.NetNSPath, web, "internet")
	// Not the host: neither the gateway nor its uplink address.
	e.expectBlocked(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort))
	e.expectBlocked(a.NetNSPath, fmt.Sprintf("%s:%d", hostUplinkIP, hostSvcPort))
	// Not another sandbox, not the metadata address, not private ranges.
	e.expectBlocked(a.NetNSPath, b.IP.String()+":80")
	e.expectBlocked(a.NetNSPath, metadataIP+":80")
	e.expectBlocked(a.NetNSPath, privateIP+":80")
	// The sandbox's own name server stays reachable although it is private.
	if got, err := udpAskUntilAnswered(a.NetNSPath, privateDNSIP+":53", "q"); err != nil || got != "echo:q" {
		t.Fatalf("DNS server %s from sandbox: %q, %v", privateDNSIP, got, err)
	}
	// The host reaches the sandbox directly (it is the host's bridge).
	e.expectGet(e.hostNS, b.IP.String()+":80", "sandbox-b")
	// Detach removes the sandbox's egress at once.
	must(t, e.net.Detach(context.Background(), "sb-default"))
	if got, err := e.net.Lookup("sb-default"); err != nil || got != nil {
		t.Fatalf("lookup after detach: %+v, %v", got, err)
	}
}

func TestBridgeSpoofedSourceIsDropped(t *testing.T) {
	e := newTestEnv(t)
	spoofer := e.attach("sb-spoof", AttachOptions{Egress: EgressPolicy{Kind: EgressNone}})
	victim := e.attach("sb-open", AttachOptions{})
	// The victim goes quiet; the spoofer takes its address and tries the
	// internet under the victim's (open) egress policy.
	must(t, InNamespacePath(victim.NetNSPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.LinkSetDown(eth)
	}))
	must(t, InNamespacePath(spoofer.NetNSPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(eth, mustAddr(victim.IP.String()+"/32"))
	}))
	spoof := func() error {
		_, err := getFrom(spoofer.NetNSPath, victim.IP.String(), webIP+":80", 500*time.Millisecond)
		return err
	}
	// Control: without the guard of the spoofer's veth the spoof works, so
	// the check below can fail.
	c, err := e.net.nft()
	must(t, err)
	_, _, br := e.net.tables()
	must(t, c.SetDeleteElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(spoofer.HostVeth)}}))
	must(t, c.Flush())
	if err := spoof(); err != nil {
		t.Fatalf("control: spoofing without the guard failed (%v); the test setup is broken", err)
	}
	must(t, c.SetAddElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(spoofer.HostVeth),
		VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: prefixSpoof + strings.TrimPrefix(spoofer.HostVeth, "sbx")}}}))
	must(t, c.Flush())
	must(t, InNamespacePath(e.hostNS, func() error { return flushNeigh(victim.IP) }))
	if err := spoof(); err == nil {
		t.Fatal("a sandbox reached the internet with another sandbox's address")
	}
}

func TestEgressAllowListAndNone(t *testing.T) {
	e := newTestEnv(t)
	allow := e.attach("sb-allow", AttachOptions{Egress: mustEgress(t, "192.168.77.0/24")})
	none := e.attach("sb-none", AttachOptions{Egress: mustEgress(t, "none")})
	hostport := e.attach("sb-hostport", AttachOptions{Egress: mustEgress(t, "none"),
		AllowHostPorts: []HostPort{{Port: hostSvcPort, Proto: TCP}}})

	e.expectGet(allow.NetNSPath, privateIP+":80", "private")
	e.expectBlocked(allow.NetNSPath, webIP+":80")
	e.expectBlocked(allow.NetNSPath, metadataIP+":80")

	e.expectBlocked(none.NetNSPath, webIP+":80")
	e.expectBlocked(none.NetNSPath, privateIP+":80")
	if _, err := udpAsk(none.NetNSPath, privateDNSIP+":53", "q", 400*time.Millisecond); err == nil {
		t.Fatal("--egress none still reached the name server")
	}

	// --dns with an allow-list: the given server answers on port 53 even
	// though its range is not allowed; the rest of that range stays shut.
	withDNS := e.attach("sb-dns", AttachOptions{Egress: mustEgress(t, webIP), DNS: []netip.Addr{netip.MustParseAddr(privateDNSIP)}})
	if withDNS.ResolvConf != "nameserver "+privateDNSIP+"\n" {
		t.Errorf("resolv.conf with --dns = %q", withDNS.ResolvConf)
	}
	if got, err := udpAskUntilAnswered(withDNS.NetNSPath, privateDNSIP+":53", "q"); err != nil || got != "echo:q" {
		t.Fatalf("--dns server from an allow-listed sandbox: %q, %v", got, err)
	}
	e.expectGet(withDNS.NetNSPath, webIP+":80", "internet")
	e.expectBlocked(withDNS.NetNSPath, privateIP+":80")

	e.expectGet(hostport.NetNSPath, fmt.Sprintf("%s:%d", hostport.Gateway, hostSvcPort), "host")
	e.expectBlocked(hostport.NetNSPath, webIP+":80")
	// The opened port is only that port, and only for that sandbox.
	e.expectBlocked(none.NetNSPath, fmt.Sprintf("%s:%d", none.Gateway, hostSvcPort))
}

func mustEgress(t *testing.T, s string) EgressPolicy {
	p, err := ParseEgress(s)
	must(t, err)
	return p
}

// flushNeigh forgets the current namespace's neighbour entry for ip.
func flushNeigh(ip netip.Addr) error {
	ns, err := netlink.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, n := range ns {
		if n.IP.Equal(ip.AsSlice()) {
			_ = netlink.NeighDel(&n)
		}
	}
	return nil
}

func TestBridgeMACTakeoverIsDropped(t *testing.T) {
	e := newTestEnv(t)
	victim := e.attach("sb-victim", AttachOptions{})
	thief := e.attach("sb-thief", AttachOptions{})
	e.serveHTTP(victim.NetNSPath, "0.0.0.0:80", "victim")
	e.expectGet(e.hostNS, victim.IP.String()+":80", "victim")
	var victimMAC net.HardwareAddr
	must(t, InNamespacePath(victim.NetNSPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		victimMAC = eth.Attrs().HardwareAddr
		return err
	}))
	// The thief takes the victim's MAC and sends a frame with it, which
	// would move the victim's bridge forwarding entry to the thief's port.
	must(t, InNamespacePath(thief.NetNSPath, func() error {
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(eth, victimMAC); err != nil {
			return err
		}
		// A static neighbour entry for the gateway, so the thief sends its
		// frame at once instead of waiting on ARP.
		return netlink.NeighSet(&netlink.Neigh{LinkIndex: eth.Attrs().Index, State: netlink.NUD_PERMANENT,
			IP: thief.Gateway.AsSlice(), HardwareAddr: net.HardwareAddr{0x02, 0, 0, 0, 0, 1}})
	}))
	sendFromThief := func() {
		must(t, InNamespacePath(thief.NetNSPath, func() error {
			c, err := net.Dial("udp4", thief.Gateway.String()+":9")
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		}))
	}
	sendFromThief()
	e.expectGet(e.hostNS, victim.IP.String()+":80", "victim")

	// Control: without the thief's guard the takeover works.
	c, err := e.net.nft()
	must(t, err)
	_, _, br := e.net.tables()
	must(t, c.SetDeleteElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(thief.HostVeth)}}))
	must(t, c.Flush())
	sendFromThief()
	if got, err := get(e.hostNS, victim.IP.String()+":80", 500*time.Millisecond); err == nil {
		t.Fatalf("control: the takeover did not work without the guard (%q); the test proves nothing", got)
	}
}

// The bridge keeps one MAC address while veths come and go: a bridge
// whose address was never set takes its lowest port's, and every sandbox
// that had the old gateway address in its ARP cache lost its traffic until
// the entry expired (half a minute).
func TestBridgeAddressStaysWhilePortsChange(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	a := e.attach("sb-steady", AttachOptions{})
	e.expectGet(a.NetNSPath, webIP+":80", "internet") // the gateway is in its ARP cache
	br, err := e.net.host.LinkByName(DefaultBridgeName)
	must(t, err)
	mac := br.Attrs().HardwareAddr.String()
	for round := 0; round < 4; round++ {
		_, err := e.net.Prepare(ctx, 3)
		must(t, err)
		br, err := e.net.host.LinkByName(DefaultBridgeName)
		must(t, err)
		if got := br.Attrs().HardwareAddr.String(); got != mac {
			t.Fatalf("round %d: the bridge's address moved from %s to %s", round, mac, got)
		}
		e.expectGet(a.NetNSPath, webIP+":80", "internet")
		must(t, e.net.DiscardPrepared(ctx))
	}
}
