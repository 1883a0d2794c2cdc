package netns

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func TestPublishedPorts(t *testing.T) {
	e := newTestEnv(t)
	tcp, err := ParsePublish("0:8080")
	must(t, err)
	udp, err := ParsePublish("127.0.0.1:0:5353/udp")
	must(t, err)
	fixed, err := ParsePublish("18080:8080")
	must(t, err)
	a := e.attach("sb-web", AttachOptions{Publish: []PortMapping{tcp, udp, fixed}})
	if len(a.Ports) != 3 || a.Ports[0].HostPort == 0 || a.Ports[1].HostPort == 0 || a.Ports[2].HostPort != 18080 {
		t.Fatalf("published ports not resolved: %v", a.Ports)
	}
	e.startBusyboxHTTPD(a.NetNSPath, 8080, "busybox-in-sandbox")
	e.serveUDPEcho(a.NetNSPath, "0.0.0.0:5353")
	hp := a.Ports[0].HostPort

	// From the host itself: 127.0.0.1 and the host's addresses.
	for _, ip := range []string{"127.0.0.1", hostUplinkIP, a.Gateway.String()} {
		e.expectGet(e.hostNS, fmt.Sprintf("%s:%d", ip, hp), "busybox-in-sandbox")
	}
	e.expectGet(e.hostNS, "127.0.0.1:18080", "busybox-in-sandbox")
	// From outside (the internet namespace) to the host's address.
	e.expectGet(e.inetNS, fmt.Sprintf("%s:%d", hostUplinkIP, hp), "busybox-in-sandbox")
	// An unpublished port of the host is not forwarded.
	e.expectBlocked(e.hostNS, fmt.Sprintf("%s:%d", hostUplinkIP, 8080))

	// UDP, bound to 127.0.0.1 only.
	up := a.Ports[1].HostPort
	if got, err := udpAskUntilAnswered(e.hostNS, fmt.Sprintf("127.0.0.1:%d", up), "ping"); err != nil || got != "echo:ping" {
		t.Fatalf("UDP via 127.0.0.1:%d: %q, %v", up, got, err)
	}
	if got, err := udpAsk(e.inetNS, fmt.Sprintf("%s:%d", hostUplinkIP, up), "ping", 400*time.Millisecond); err == nil {
		t.Fatalf("UDP published on 127.0.0.1 answered from outside: %q", got)
	}

	// After detach the port is gone.
	must(t, e.net.Detach(context.Background(), "sb-web"))
	e.expectBlocked(e.hostNS, fmt.Sprintf("127.0.0.1:%d", hp))
}

func TestPublishedUDPFromOutside(t *testing.T) {
	e := newTestEnv(t)
	m, err := ParsePublish("5300:53/udp")
	must(t, err)
	a := e.attach("sb-udp", AttachOptions{Publish: []PortMapping{m}})
	e.serveUDPEcho(a.NetNSPath, "0.0.0.0:53")
	if got, err := udpAskUntilAnswered(e.inetNS, hostUplinkIP+":5300", "hi"); err != nil || got != "echo:hi" {
		t.Fatalf("UDP from outside to %s:5300: %q, %v", hostUplinkIP, got, err)
	}
	if got, err := udpAskUntilAnswered(e.hostNS, "127.0.0.1:5300", "hi"); err != nil || got != "echo:hi" {
		t.Fatalf("UDP from the host to 127.0.0.1:5300: %q, %v", got, err)
	}
}

func TestPublishConflicts(t *testing.T) {
	e := newTestEnv(t)
	m, _ := ParsePublish("19000:80")
	e.attach("sb-first", AttachOptions{Publish: []PortMapping{m}})
	before := e.leftovers()
	ctx := context.Background()

	_, err := e.net.Attach(ctx, "sb-second", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	if err == nil || !strings.Contains(err.Error(), "already published by sandbox sb-first") {
		t.Fatalf("same host port twice: err = %v", err)
	}
	m127, _ := ParsePublish("127.0.0.1:19000:81")
	if _, err := e.net.Attach(ctx, "sb-second", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m127}}); err == nil {
		t.Fatal("127.0.0.1:19000 accepted while 19000 is published on all addresses")
	}
	// A host process holding the port.
	var ln net.Listener
	must(t, InNamespacePath(e.hostNS, func() (err error) {
		ln, err = net.Listen("tcp4", "127.0.0.1:19001")
		return err
	}))
	defer ln.Close()
	busy, _ := ParsePublish("19001:80")
	_, err = e.net.Attach(ctx, "sb-second", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{busy}})
	if err == nil || !strings.Contains(err.Error(), "in use by a process on the host") {
		t.Fatalf("port held by a host process: err = %v", err)
	}
	// An address the host does not have.
	foreign, _ := ParsePublish("198.51.100.7:19002:80")
	_, err = e.net.Attach(ctx, "sb-second", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{foreign}})
	if err == nil || !strings.Contains(err.Error(), "not an address of this host") {
		t.Fatalf("foreign host address: err = %v", err)
	}
	// Failed attaches changed nothing.
	if after := e.leftovers(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("failed attaches left state behind:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := e.net.Attach(ctx, "sb-first", AttachOptions{Mode: ModeBridge}); err == nil {
		t.Fatal("attaching an already attached sandbox succeeded")
	}
}

// A UDP client keeps its source port while the sandbox behind a published
// port is replaced by one with another address: its datagrams must reach the
// new sandbox, not follow a stale conntrack entry to the old address.
func TestPublishedUDPFollowsReplacement(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	m, _ := ParsePublish("5400:53/udp")
	var c *net.UDPConn
	must(t, InNamespacePath(e.hostNS, func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5400})
		return err
	}))
	defer c.Close()
	// The same socket (source port) throughout; lost datagrams are sent
	// again, but a stale conntrack entry would swallow every one of them.
	ask := func(msg string) (string, error) { return udpExchange(c, msg, 500*time.Millisecond) }
	first, err := e.net.Attach(ctx, "udp-1", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	e.serveUDPEcho(first.NetNSPath, "0.0.0.0:53")
	if got, err := ask("a"); err != nil || got != "echo:a" {
		t.Fatalf("first sandbox: %q, %v", got, err)
	}
	must(t, e.net.Detach(ctx, "udp-1"))
	filler := e.attach("filler", AttachOptions{}) // takes the old address
	second := e.attach("udp-2", AttachOptions{Publish: []PortMapping{m}})
	if filler.IP != first.IP || second.IP == first.IP {
		t.Fatalf("address reuse not as the test expects: first %s filler %s second %s", first.IP, filler.IP, second.IP)
	}
	e.serveUDPEcho(second.NetNSPath, "0.0.0.0:53")
	if got, err := ask("b"); err != nil || got != "echo:b" {
		t.Fatalf("replacement sandbox behind the same published port: %q, %v", got, err)
	}
}
