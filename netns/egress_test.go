package netns

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/egress/egressd"
)

// The fake internet of the egress tests: sites on TEST-NET-3 with names in
// the zone "test.", served by an authoritative name server that logs every
// query.
const (
	allowedIP = "203.0.113.10"
	evilIP    = "203.0.113.20"
	dohIP     = "203.0.113.30"
	zoneDNSIP = "203.0.113.53"
)

var zone = map[string]string{
	"allowed.test.":         "A " + allowedIP,
	"a.w.test.":             "A " + allowedIP,
	"a.b.w.test.":           "A " + allowedIP,
	"w.test.":               "A " + allowedIP,
	"evil.test.":            "A " + evilIP,
	"dns.test.":             "A " + dohIP,
	"cname.allowed.test.":   "CNAME target.other.test.",
	"target.other.test.":    "A " + allowedIP,
	"private.allowed.test.": "A " + privateIP,
	"meta.allowed.test.":    "A " + metadataIP,
	"mixed.allowed.test.":   "A " + metadataIP + "," + allowedIP,
	"x.y.allowed.test.":     "A " + allowedIP,
}

// egressEnv is a testEnv with the fake internet's sites, a test CA, and
// an egress daemon on the bridge.
type egressEnv struct {
	*testEnv
	roots   *x509.CertPool
	mu      sync.Mutex
	queries []string                 // names the authoritative server was asked
	hits    map[string]*atomic.Int64 // connections per site address
	udp443  atomic.Int64
	daemon  *egressd.Daemon
	stop    context.CancelFunc
	done    chan error
	audit   chan egress.AuditEvent
}

func newEgressEnv(t *testing.T) *egressEnv {
	e := &egressEnv{testEnv: newTestEnv(t), hits: map[string]*atomic.Int64{}, audit: make(chan egress.AuditEvent, 1000)}
	must(t, InNamespacePath(e.inetNS, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		for _, a := range []string{allowedIP, evilIP, dohIP, zoneDNSIP} {
			if err := netlink.AddrAdd(l, mustAddr(a+"/32")); err != nil {
				return err
			}
		}
		return nil
	}))
	e.serveZone()
	caCert, caKey := newTestCA(t)
	e.roots = x509.NewCertPool()
	e.roots.AddCert(caCert)
	for _, ip := range []string{allowedIP, evilIP, dohIP} {
		e.hits[ip] = &atomic.Int64{}
		e.serveSite(ip, caCert, caKey)
	}
	var pc net.PacketConn
	must(t, InNamespacePath(e.inetNS, func() (err error) {
		pc, err = net.ListenPacket("udp4", allowedIP+":443")
		return err
	}))
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			e.udp443.Add(1)
		}
	}()
	return e
}

func newTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sbx test public CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	c, err := x509.ParseCertificate(der)
	must(t, err)
	return c, key
}

// serveZone runs the authoritative server of "test." on zoneDNSIP:53.
func (e *egressEnv) serveZone() {
	var pc net.PacketConn
	must(e.t, InNamespacePath(e.inetNS, func() (err error) {
		pc, err = net.ListenPacket("udp4", zoneDNSIP+":53")
		return err
	}))
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		name := strings.ToLower(q.Question[0].Name)
		e.mu.Lock()
		e.queries = append(e.queries, name)
		e.mu.Unlock()
		for name != "" {
			rec, ok := zone[name]
			if !ok {
				if len(m.Answer) == 0 {
					m.Rcode = dns.RcodeNameError
				}
				break
			}
			typ, val, _ := strings.Cut(rec, " ")
			if typ == "CNAME" {
				rr, _ := dns.NewRR(name + " 30 IN CNAME " + val)
				m.Answer = append(m.Answer, rr)
				name = val
				continue
			}
			if q.Question[0].Qtype == dns.TypeA || q.Question[0].Qtype == dns.TypeANY {
				for _, ip := range strings.Split(val, ",") {
					rr, _ := dns.NewRR(name + " 30 IN A " + ip)
					m.Answer = append(m.Answer, rr)
				}
			}
			if q.Question[0].Qtype == dns.TypeAAAA {
				rr, _ := dns.NewRR(name + " 30 IN AAAA 2001:db8::1")
				m.Answer = append(m.Answer, rr)
			}
			break
		}
		_ = w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	e.t.Cleanup(func() { _ = srv.Shutdown() })
}

func (e *egressEnv) asked(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range e.queries {
		if q == name+"." {
			return true
		}
	}
	return false
}

// serveSite serves HTTPS on ip:443 (a certificate for every name of the
// zone, chosen by SNI) and HTTP on ip:80; both answer
// "site=IP sni=SNI host=HOST".
func (e *egressEnv) serveSite(ip string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(e.t, err)
	var names []string
	for n := range zone {
		names = append(names, strings.TrimSuffix(n, "."))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: ip},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(e.t, err)
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sni := ""
		if r.TLS != nil {
			sni = r.TLS.ServerName
		}
		fmt.Fprintf(w, "site=%s sni=%s host=%s", ip, sni, r.Host)
	})
	for _, port := range []string{"443", "80"} {
		var ln net.Listener
		must(e.t, InNamespacePath(e.inetNS, func() (err error) {
			ln, err = net.Listen("tcp4", ip+":"+port)
			return err
		}))
		hits := e.hits[ip]
		ln = countingListener{Listener: ln, n: hits}
		s := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		if port == "443" {
			s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
			go s.ServeTLS(ln, "", "")
		} else {
			go s.Serve(ln)
		}
		e.t.Cleanup(func() { s.Close() })
	}
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startDaemon runs an egress daemon for the env's bridge, the way the
// sandbox package does (the bridge must exist: attach first).
func (e *egressEnv) startDaemon() {
	e.t.Helper()
	_, gw := e.net.Subnet()
	lookup := e.net.EgressLookup()
	d, err := egressd.Listen(egressd.Config{
		Listen:   gw,
		InHostNS: e.net.InHostNS,
		Lookup: func(ip netip.Addr) (*egressd.Target, bool) {
			t, ok := lookup(ip)
			if !ok {
				return nil, false
			}
			var up []netip.AddrPort
			for _, a := range t.DNS {
				up = append(up, netip.AddrPortFrom(a, 53))
			}
			return &egressd.Target{Sandbox: egress.SandboxRef{ID: t.Sandbox, IP: t.IP, StateDir: egress.StateDir(t.Root, t.Sandbox)},
				Policy: t.Policy, Upstream: up}, true
		},
		Audit: func(ev egress.AuditEvent) {
			select {
			case e.audit <- ev:
			default:
			}
		},
	})
	if err != nil {
		e.t.Fatalf("start egress daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.daemon, e.stop, e.done = d, cancel, make(chan error, 1)
	go func() { e.done <- d.Serve(ctx) }()
	e.t.Cleanup(e.stopDaemon)
}

func (e *egressEnv) stopDaemon() {
	if e.stop == nil {
		return
	}
	e.stop()
	if err := <-e.done; err != nil {
		e.t.Errorf("egress daemon: %v", err)
	}
	e.stop = nil
}

// resolve asks the sandbox's name server (any address: the sandbox's DNS
// goes to the daemon) for name and type.
func resolve(ns, server, name string, qtype uint16) (*dns.Msg, error) {
	var conn net.Conn
	err := InNamespacePath(ns, func() (err error) {
		conn, err = net.Dial("udp4", server+":53")
		return err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Timeout: 3 * time.Second}
	r, _, err := c.ExchangeWithConn(q, &dns.Conn{Conn: conn})
	return r, err
}

func aRecords(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// dialIn connects from inside ns.
func dialIn(ns, addr string) (net.Conn, error) {
	var c net.Conn
	err := InNamespacePath(ns, func() (err error) {
		c, err = (&net.Dialer{Timeout: 3 * time.Second}).Dial("tcp4", addr)
		return err
	})
	return c, err
}

// httpsGet fetches https://sni/ from ns, connecting to addr, and returns
// the body.
func (e *egressEnv) httpsGet(ns, addr, sni, host string) (string, error) {
	c, err := dialIn(ns, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// No ServerName: no SNI sent (the server is not verified either).
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: e.roots, InsecureSkipVerify: sni == ""})
	req, _ := http.NewRequest("GET", "https://"+host+"/", nil)
	if err := req.Write(tc); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// httpGets sends the requests (by Host) on one plain connection to addr
// and returns the status and body of each.
func httpGets(ns, addr string, hosts ...string) ([]string, error) {
	c, err := dialIn(ns, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	var out []string
	for _, h := range hosts {
		req, _ := http.NewRequest("GET", "http://"+h+"/", nil)
		if err := req.Write(c); err != nil {
			return out, err
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return out, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b))))
	}
	return out, nil
}

// refused reports whether err is what a refused connection looks like to
// the sandbox: a reset or a refusal, never a timeout.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func (e *egressEnv) attachEgress(id, policy string) *Attachment {
	e.t.Helper()
	p, err := ParseEgress(policy)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.attach(id, AttachOptions{Egress: p, DNS: []netip.Addr{netip.MustParseAddr(zoneDNSIP)}})
}

func TestEgressByName(t *testing.T) {
	e := newEgressEnv(t)
	a := e.attachEgress("eg1", "allowed.test,*.w.test,cname.allowed.test,**.allowed.test,!meta.allowed.test")
	e.startDaemon()
	ns := a.NetNSPath

	// DNS: the sandbox's queries, to any server, reach the daemon.
	r, err := resolve(ns, zoneDNSIP, "allowed.test", dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeSuccess || strings.Join(aRecords(r), ",") != allowedIP {
		t.Fatalf("resolve allowed.test: %v, %v", r, err)
	}
	for _, name := range []string{"evil.test", "dns.test", "target.other.test", "w.test", "a.b.w.test", "meta.allowed.test", "allowedd.test"} {
		r, err := resolve(ns, "8.8.8.8", name, dns.TypeA)
		if err != nil || r.Rcode != dns.RcodeRefused {
			t.Errorf("resolve %s: %v, %v; want REFUSED", name, r, err)
		}
		if e.asked(name) {
			t.Errorf("%s was asked upstream", name)
		}
	}
	// A CNAME chain of an allowed name resolves; a private or metadata
	// answer is dropped.
	if r, err := resolve(ns, zoneDNSIP, "cname.allowed.test", dns.TypeA); err != nil || strings.Join(aRecords(r), ",") != allowedIP {
		t.Errorf("resolve cname.allowed.test: %v, %v", r, err)
	}
	if r, err := resolve(ns, zoneDNSIP, "private.allowed.test", dns.TypeA); err != nil || len(aRecords(r)) != 0 {
		t.Errorf("resolve private.allowed.test: %v, %v; want no address", r, err)
	}
	if r, err := resolve(ns, zoneDNSIP, "mixed.allowed.test", dns.TypeA); err != nil || strings.Join(aRecords(r), ",") != allowedIP {
		t.Errorf("resolve mixed.allowed.test: %v, %v; want only the public address", r, err)
	}
	for _, qt := range []uint16{dns.TypeAAAA, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeTXT} {
		if r, err := resolve(ns, zoneDNSIP, "allowed.test", qt); err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("resolve allowed.test %s: %v, %v; want NODATA", dns.TypeToString[qt], r, err)
		}
	}

	// HTTPS and HTTP to an allowed name.
	if got, err := e.httpsGet(ns, allowedIP+":443", "allowed.test", "allowed.test"); err != nil || got != "site="+allowedIP+" sni=allowed.test host=allowed.test" {
		t.Errorf("https allowed.test: %q, %v", got, err)
	}
	if got, err := httpGets(ns, allowedIP+":80", "allowed.test", "allowed.test"); err != nil || len(got) != 2 || got[1] != "200 site="+allowedIP+" sni= host=allowed.test" {
		t.Errorf("http allowed.test twice: %q, %v", got, err)
	}
	// Wildcards and CNAMEs at the proxy.
	for _, sni := range []string{"a.w.test", "cname.allowed.test", "x.y.allowed.test"} {
		if got, err := e.httpsGet(ns, allowedIP+":443", sni, sni); err != nil || !strings.HasPrefix(got, "site="+allowedIP) {
			t.Errorf("https %s: %q, %v", sni, got, err)
		}
	}

	// The name decides where the proxy connects, not the sandbox's address:
	// SNI allowed.test sent to the evil site reaches the allowed one.
	evilHits := e.hits[evilIP].Load()
	if got, err := e.httpsGet(ns, evilIP+":443", "allowed.test", "allowed.test"); err != nil || !strings.HasPrefix(got, "site="+allowedIP) {
		t.Errorf("https allowed.test via the evil address: %q, %v", got, err)
	}
	// Refused: other names, names resolving to private or metadata
	// addresses, no SNI (direct IP), the wrong port in Host, wildcard edges.
	for _, c := range []struct{ addr, sni string }{
		{evilIP + ":443", "evil.test"}, {dohIP + ":443", "dns.test"}, {allowedIP + ":443", "w.test"},
		{allowedIP + ":443", "a.b.w.test"}, {allowedIP + ":443", "private.allowed.test"}, {allowedIP + ":443", "meta.allowed.test"},
		{allowedIP + ":443", "target.other.test"}, {allowedIP + ":443", allowedIP}, {allowedIP + ":443", ""},
	} {
		if got, err := e.httpsGet(ns, c.addr, c.sni, "allowed.test"); err == nil || !refused(err) {
			t.Errorf("https %s (SNI %q): %q, %v; want it reset", c.addr, c.sni, got, err)
		}
	}
	if got, err := httpGets(ns, evilIP+":80", "evil.test"); err == nil || !refused(err) {
		t.Errorf("http evil.test: %q, %v; want it reset", got, err)
	}
	if got, err := httpGets(ns, allowedIP+":80", allowedIP); err == nil || !refused(err) {
		t.Errorf("http by address: %q, %v; want it reset", got, err)
	}
	if got, err := httpGets(ns, allowedIP+":80", "allowed.test:8080"); err == nil || !refused(err) {
		t.Errorf("http Host with another port: %q, %v; want it reset", got, err)
	}
	// A later request on an allowed connection may not switch hosts.
	if got, err := httpGets(ns, allowedIP+":80", "allowed.test", "evil.test"); err != nil || len(got) != 2 || !strings.HasPrefix(got[1], "421 ") {
		t.Errorf("http allowed.test then evil.test on one connection: %q, %v; want 421", got, err)
	}
	if n := e.hits[evilIP].Load(); n != evilHits {
		t.Errorf("the evil site got %d connections", n-evilHits)
	}
	// Other TCP ports and UDP 443 (QUIC) do not get out; UDP 443 is
	// refused at once so clients fall back to TCP.
	if _, err := dialIn(ns, allowedIP+":8443"); err == nil {
		t.Error("TCP 8443 to an allowed site's address connected")
	}
	u, err := dialUDP(ns, allowedIP+":443")
	must(t, err)
	defer u.Close()
	u.SetDeadline(time.Now().Add(2 * time.Second))
	u.Write([]byte("quic initial"))
	if _, err := u.Read(make([]byte, 100)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("UDP 443: %v; want connection refused (ICMP port unreachable)", err)
	}
	if n := e.udp443.Load(); n != 0 {
		t.Errorf("the site got %d UDP 443 datagrams", n)
	}
	// The daemon's ports are not reachable without the redirect.
	_, gw := e.net.Subnet()
	if c, err := dialIn(ns, netip.AddrPortFrom(gw, egress.ProxyPort).String()); err == nil {
		c.Close()
		t.Error("the proxy port is reachable directly")
	}
	// Every connection was audited.
	var allow, deny int
	for len(e.audit) > 0 {
		ev := <-e.audit
		if ev.Sandbox != "eg1" {
			t.Errorf("audit event of sandbox %q", ev.Sandbox)
		}
		if ev.Kind == "connection" && ev.Decision == "allow" {
			allow++
		} else if ev.Decision == "deny" {
			deny++
		}
	}
	if allow < 6 || deny < 10 {
		t.Errorf("audit: %d allowed and %d denied connections", allow, deny)
	}
}

func TestEgressFailsClosedAndLiveChange(t *testing.T) {
	e := newEgressEnv(t)
	a := e.attachEgress("eg2", "allowed.test")
	e.startDaemon()
	ns := a.NetNSPath
	if _, err := e.httpsGet(ns, allowedIP+":443", "allowed.test", "allowed.test"); err != nil {
		t.Fatalf("https allowed.test: %v", err)
	}
	// A live connection when the daemon stops is reset; new ones are
	// refused, and DNS fails.
	c, err := dialIn(ns, allowedIP+":80")
	must(t, err)
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	io.Copy(io.Discard, resp.Body)
	e.stopDaemon()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if _, err := http.ReadResponse(br, nil); err == nil || !refused(err) {
		t.Errorf("live connection after the daemon stopped: %v; want it reset", err)
	}
	if _, err := e.httpsGet(ns, allowedIP+":443", "allowed.test", "allowed.test"); err == nil || !refused(err) {
		t.Errorf("https with the daemon down: %v; want it refused", err)
	}
	if r, err := resolve(ns, zoneDNSIP, "allowed.test", dns.TypeA); err == nil {
		t.Errorf("DNS with the daemon down answered: %v", r)
	}
	if n := e.hits[allowedIP].Load(); n != 2 {
		t.Errorf("the site got %d connections, want 2 (none while the daemon was down)", n)
	}
	e.startDaemon()
	if _, err := e.httpsGet(ns, allowedIP+":443", "allowed.test", "allowed.test"); err != nil {
		t.Fatalf("https after the daemon restarted: %v", err)
	}

	// A live change: evil.test allowed, allowed.test no more.
	p, err := ParseEgress("evil.test")
	must(t, err)
	e.reconfigure("eg2", AttachOptions{Mode: ModeBridge, Egress: p, DNS: []netip.Addr{netip.MustParseAddr(zoneDNSIP)}})
	if got, err := e.httpsGet(ns, evilIP+":443", "evil.test", "evil.test"); err != nil || !strings.HasPrefix(got, "site="+evilIP) {
		t.Errorf("https evil.test after the change: %q, %v", got, err)
	}
	if _, err := e.httpsGet(ns, allowedIP+":443", "allowed.test", "allowed.test"); err == nil || !refused(err) {
		t.Errorf("https allowed.test after the change: %v; want it refused", err)
	}
	if r, err := resolve(ns, zoneDNSIP, "allowed.test", dns.TypeA); err != nil || r.Rcode != dns.RcodeRefused {
		t.Errorf("resolve allowed.test after the change: %v, %v; want REFUSED", r, err)
	}
	// Back to a CIDR policy: no redirect, the proxy chain goes.
	p, err = ParseEgress(allowedIP)
	must(t, err)
	e.reconfigure("eg2", AttachOptions{Mode: ModeBridge, Egress: p})
	if got, err := get(ns, allowedIP+":80", 3*time.Second); err != nil || !strings.HasPrefix(got, "site="+allowedIP) {
		t.Errorf("http by address under a CIDR policy: %q, %v", got, err)
	}
	e.expectBlocked(ns, evilIP+":80")
	must(t, e.net.Detach(context.Background(), "eg2"))
	if left := e.leftovers(); len(left) > 0 {
		t.Errorf("left after detach: %v", left)
	}
}

func (e *egressEnv) reconfigure(id string, o AttachOptions) {
	e.t.Helper()
	r, err := e.net.Reconfigure(context.Background(), id, o)
	if err == nil {
		err = r.Wait()
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestEgressDetachLeavesNothing(t *testing.T) {
	e := newEgressEnv(t)
	e.attachEgress("eg3", "allowed.test,!10.9.0.0/16")
	// A daemon came and went: its lock file must not keep the bridge's
	// state directory once the last lease is gone.
	unlock, err := e.net.LockEgress()
	must(t, err)
	unlock()
	must(t, e.net.Detach(context.Background(), "eg3"))
	if left := e.leftovers(); len(left) > 0 {
		t.Errorf("left after detach: %v", left)
	}
	if _, err := os.Stat(filepath.Dir(e.net.EgressLockPath())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the bridge's state directory is left after its last sandbox: %v", err)
	}
}
