package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/vishvananda/netlink"
)

// testEnv is a private world for one test: a namespace playing the host
// (with the bridge, rules and an uplink) and a namespace playing the
// internet (TEST-NET-3 203.0.113.0/24, a web server, a "metadata service" on
// 169.254.169.254, a private-range server and a name server). Nothing
// outside these namespaces is touched.
type testEnv struct {
	t       testing.TB
	dir     string
	hostNS  string // host stand-in
	inetNS  string // internet stand-in
	net     *Network
	cfg     Config
	servers []*http.Server
}

const (
	hostUplinkIP = "203.0.113.1"
	webIP        = "203.0.113.2"
	metadataIP   = "169.254.169.254"
	privateIP    = "192.168.77.1"
	privateDNSIP = "192.168.77.53"
	hostSvcPort  = 8081
)

func requireRoot(t testing.TB) {
	t.Helper()
	roottest.Require(t, "network namespaces, veths, nftables")
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	e := &testEnv{t: t, dir: dir, hostNS: filepath.Join(dir, "host"), inetNS: filepath.Join(dir, "inet")}
	for _, p := range []string{e.hostNS, e.inetNS} {
		if err := CreateNamespace(p, loUp); err != nil {
			t.Fatalf("create test namespace: %v", err)
		}
		t.Cleanup(func() {
			if err := RemoveNamespace(p); err != nil {
				t.Errorf("remove test namespace: %v", err)
			}
		})
	}
	// Uplink: host "uplink" 203.0.113.1/24 <-> internet "eth0" 203.0.113.2/24.
	// The internet has no route back to the sandbox subnet: only NAT works.
	inetFD := openNS(t, e.inetNS)
	must(t, InNamespacePath(e.hostNS, func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(inetFD)}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("uplink")
		if err := netlink.AddrAdd(l, mustAddr(hostUplinkIP+"/24")); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		for _, dst := range []string{metadataIP + "/32", "192.168.77.0/24"} {
			_, d, _ := net.ParseCIDR(dst)
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: d, Gw: net.ParseIP(webIP)}); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, InNamespacePath(e.inetNS, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, mustAddr(webIP+"/24")); err != nil {
			return err
		}
		lo, _ := netlink.LinkByName("lo")
		for _, a := range []string{metadataIP + "/32", privateIP + "/32", privateDNSIP + "/32"} {
			if err := netlink.AddrAdd(lo, mustAddr(a)); err != nil {
				return err
			}
		}
		return netlink.LinkSetUp(l)
	}))
	e.serveHTTP(e.inetNS, webIP+":80", "internet")
	e.serveHTTP(e.inetNS, metadataIP+":80", "metadata")
	e.serveHTTP(e.inetNS, privateIP+":80", "private")
	e.serveUDPEcho(e.inetNS, privateDNSIP+":53")
	e.serveHTTP(e.hostNS, fmt.Sprintf("0.0.0.0:%d", hostSvcPort), "host")

	resolv := filepath.Join(dir, "resolv.conf")
	must(t, os.WriteFile(resolv, []byte("nameserver 127.0.0.53\nnameserver "+privateDNSIP+"\nsearch example.test\n"), 0o644))
	e.cfg = Config{StateDir: filepath.Join(dir, "state"), RunDir: filepath.Join(dir, "run"), SharedDir: filepath.Join(dir, "shared"), HostNetNS: e.hostNS, HostResolvConf: resolv}
	nw, err := Open(e.cfg)
	if err != nil {
		t.Fatalf("open network: %v", err)
	}
	e.net = nw
	t.Cleanup(func() {
		for _, s := range e.servers {
			s.Close()
		}
		// Whatever a failed test left: GC and drain unmount the namespaces.
		if _, err := nw.GC(context.Background(), nil); err != nil {
			t.Errorf("final gc: %v", err)
		}
		if err := nw.DiscardPrepared(context.Background()); err != nil {
			t.Errorf("final drain: %v", err)
		}
		nw.Close()
	})
	return e
}

func loUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

func openNS(t testing.TB, p string) int {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// serveHTTP starts a web server answering body on addr inside namespace ns.
func (e *testEnv) serveHTTP(ns, addr, body string) string {
	var ln net.Listener
	must(e.t, InNamespacePath(ns, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}))
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go s.Serve(ln)
	e.servers = append(e.servers, s)
	e.t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// serveUDPEcho answers every datagram on addr inside ns with "echo:"+payload.
func (e *testEnv) serveUDPEcho(ns, addr string) {
	var pc net.PacketConn
	must(e.t, InNamespacePath(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", addr)
		return err
	}))
	e.t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
}

// get fetches http://addr/ from inside namespace ns, with a short timeout
// (blocked traffic is dropped, so a block shows as a timeout).
func get(ns, addr string, timeout time.Duration) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := InNamespacePath(ns, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: timeout}
	resp, err := cl.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return strings.TrimSpace(string(b)), err
}

// getFrom fetches http://addr/ from inside ns with source address src.
func getFrom(ns, src, addr string, timeout time.Duration) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := InNamespacePath(ns, func() (err error) {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err = d.DialContext(ctx, network, a)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: timeout}
	resp, err := cl.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return strings.TrimSpace(string(b)), err
}

// udpAsk sends msg to addr from inside ns and returns the first reply.
// dialUDP makes a UDP socket in namespace ns connected to addr.
func dialUDP(ns, addr string) (c net.Conn, err error) {
	err = InNamespacePath(ns, func() (err error) {
		c, err = net.Dial("udp4", addr)
		return err
	})
	return c, err
}

func udpAsk(ns, addr, msg string, timeout time.Duration) (string, error) {
	c, err := dialUDP(ns, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// udpRetries bounds how often udpExchange sends its datagram again.
const udpRetries = 20

// udpExchange sends msg on c and returns the first answer, sending again
// (as every UDP client does: datagrams may be dropped, e.g. while the
// first one waits on neighbour resolution on a loaded machine) every
// interval, at most udpRetries times. A forwarding that is wrong stays
// wrong on every retry, so the retries hide no bug.
func udpExchange(c net.Conn, msg string, interval time.Duration) (string, error) {
	buf := make([]byte, 1500)
	var err error
	for range udpRetries {
		if _, err = c.Write([]byte(msg)); err != nil {
			return "", err
		}
		c.SetReadDeadline(time.Now().Add(interval))
		for {
			var n int
			if n, err = c.Read(buf); err != nil {
				break
			}
			// A late echo of an earlier datagram (one sent again by an
			// earlier exchange on this socket) is not the answer.
			if got := string(buf[:n]); !strings.HasPrefix(got, "echo:") || got == "echo:"+msg {
				return got, nil
			}
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return "", err
		}
	}
	return "", fmt.Errorf("no answer to %d datagrams %s apart: %w", udpRetries, interval, err)
}

// udpAskUntilAnswered is udpAsk for an exchange that must succeed: it
// retries lost datagrams (see udpExchange).
func udpAskUntilAnswered(ns, addr, msg string) (string, error) {
	c, err := dialUDP(ns, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return udpExchange(c, msg, 500*time.Millisecond)
}

func (e *testEnv) expectGet(ns, addr, want string) {
	e.t.Helper()
	got, err := get(ns, addr, 3*time.Second)
	if err != nil || got != want {
		e.t.Fatalf("GET %s from %s: got %q, %v; want %q", addr, filepath.Base(ns), got, err, want)
	}
}

func (e *testEnv) expectBlocked(ns, addr string) {
	e.t.Helper()
	got, err := get(ns, addr, 400*time.Millisecond)
	if err == nil {
		e.t.Fatalf("GET %s from %s: got %q, want it blocked", addr, filepath.Base(ns), got)
	}
}

func (e *testEnv) attach(id string, opts AttachOptions) *Attachment {
	e.t.Helper()
	opts.Mode = ModeBridge
	a, err := e.net.Attach(context.Background(), id, opts)
	if err != nil {
		e.t.Fatalf("attach %s: %v", id, err)
	}
	e.t.Cleanup(func() {
		if err := e.net.Detach(context.Background(), id); err != nil {
			e.t.Errorf("detach %s: %v", id, err)
		}
	})
	return a
}

// leftovers lists everything sbx made per sandbox that still exists: lease
// files, veths on the bridge, namespace mounts, per-sandbox chains, map
// elements and published-port jumps.
func (e *testEnv) leftovers() []string {
	e.t.Helper()
	var out []string
	ents, _ := os.ReadDir(e.net.leaseDir())
	for _, x := range ents {
		out = append(out, "lease "+x.Name())
	}
	ents, _ = os.ReadDir(e.cfg.RunDir)
	for _, x := range ents {
		out = append(out, "netns "+x.Name())
	}
	links, err := e.net.host.LinkList()
	must(e.t, err)
	for _, l := range links {
		if l.Type() == "veth" && strings.HasPrefix(l.Attrs().Name, "sbx") {
			out = append(out, "veth "+l.Attrs().Name)
		}
	}
	c, err := e.net.nft()
	must(e.t, err)
	chains, err := c.ListChains()
	must(e.t, err)
	for _, ch := range chains {
		if ch.Table.Name == e.net.tableName() && ch.Hooknum == nil && ch.Name != "published" {
			out = append(out, "chain "+ch.Name)
		}
	}
	inet, nat, br := e.net.tables()
	for _, s := range []*nftables.Set{fwdMap(inet), hostInMap(inet), portsMap(br)} {
		els, err := c.GetSetElements(s)
		if err != nil {
			e.t.Fatalf("read map %s: %v", s.Name, err)
		}
		for range els {
			out = append(out, "element of "+s.Name)
		}
	}
	rules, err := c.GetRules(nat, &nftables.Chain{Name: "published", Table: nat})
	must(e.t, err)
	for range rules {
		out = append(out, "published jump")
	}
	rules, err = c.GetRules(nat, &nftables.Chain{Name: "prerouting", Table: nat})
	must(e.t, err)
	for _, r := range rules {
		if len(r.UserData) > 0 {
			out = append(out, "egress jump "+string(r.UserData))
		}
	}
	return out
}

// startBusyboxHTTPD runs busybox httpd on port inside the sandbox namespace
// and waits (bounded) until it answers there.
func (e *testEnv) startBusyboxHTTPD(ns string, port int, body string) {
	e.t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		e.t.Fatal("busybox is needed (apt-get install busybox-static)")
	}
	www := filepath.Join(e.dir, "www-"+filepath.Base(ns))
	must(e.t, os.MkdirAll(www, 0o755))
	must(e.t, os.WriteFile(filepath.Join(www, "index.html"), []byte(body+"\n"), 0o644))
	cmd := exec.Command("nsenter", "--net="+ns, bb, "httpd", "-f", "-p", fmt.Sprint(port), "-h", www)
	must(e.t, cmd.Start())
	e.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 100; i++ {
		if got, err := get(ns, fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil && got == body {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatal("busybox httpd in the sandbox did not answer within 2s")
}

func runNetlinkRoute(dst, gw string) error {
	l, err := netlink.LinkByName("uplink")
	if err != nil {
		return err
	}
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: d, Gw: net.ParseIP(gw)})
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
