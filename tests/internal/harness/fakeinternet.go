package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/tests/fixture"
)

// FakeInternet is a network namespace on TEST-NET-3 joined to a test
// host namespace by a veth: a name server at 203.0.113.53 for the zone
// test., and HTTPS sites (h2, WebSocket) signed by a CA of the test.
type FakeInternet struct {
	t     testing.TB
	ns    string
	CAPEM []byte // the CA of its sites
	mu    sync.Mutex
	// seen are the requests each site received: host -> "METHOD PATH
	// Authorization".
	seen map[string][]string
}

// vethCount numbers the fake internets' veths.
var vethCount atomic.Int64

// sites are the names the fake internet serves, with their addresses.
var sites = map[string]string{"api.test": "203.0.113.10", "other.test": "203.0.113.11"}

// NewFakeInternet joins a new fake internet to the host namespace
// hostNS (HostNS); it goes with the test.
func NewFakeInternet(t testing.TB, hostNS string) *FakeInternet {
	t.Helper()
	f := &FakeInternet{t: t, ns: HostNS(t), seen: map[string][]string{}}
	veth := fmt.Sprintf("sbxfi%d", vethCount.Add(1))
	steps := [][]string{
		{"-n", hostNS, "link", "add", veth + "h", "type", "veth", "peer", "name", veth + "i", "netns", f.ns},
		{"-n", hostNS, "addr", "add", "203.0.113.254/24", "dev", veth + "h"},
		{"-n", hostNS, "link", "set", veth + "h", "up"},
		{"-n", f.ns, "addr", "add", "203.0.113.10/24", "dev", veth + "i"},
		{"-n", f.ns, "addr", "add", "203.0.113.11/32", "dev", veth + "i"},
		{"-n", f.ns, "addr", "add", "203.0.113.53/32", "dev", veth + "i"},
		{"-n", f.ns, "link", "set", veth + "i", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", s, err, out)
		}
	}
	cert, caPEM := siteCert(t)
	f.CAPEM = caPEM
	f.serveDNS()
	for name, ip := range sites {
		f.serveSite(name, ip, cert)
	}
	return f
}

// siteCert makes a CA and a certificate for every site, signed by it.
func siteCert(t testing.TB) (tls.Certificate, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake public CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sites"},
		DNSNames: []string{"api.test", "other.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leafT, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// inNS runs fn on a thread in the network namespace ns; sockets fn
// opens stay there. The thread is left to die.
func inNS(t testing.TB, ns string, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// serveDNS answers A queries for the sites; everything else NXDOMAIN.
func (f *FakeInternet) serveDNS() {
	var pc net.PacketConn
	inNS(f.t, f.ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", "203.0.113.53:53")
		return err
	})
	f.t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
			rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true}
			ip, ok := sites[name]
			if !ok {
				rh.RCode = dnsmessage.RCodeNameError
			}
			b := dnsmessage.NewBuilder(nil, rh)
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if ok && q.Type == dnsmessage.TypeA {
				a := net.ParseIP(ip).To4()
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte(a)})
			}
			out, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
}

// serveSite serves name over HTTPS (h2 and http/1.1) at ip:443: every
// request is recorded and answered with what it carried; /ws upgrades and
// echoes one line.
func (f *FakeInternet) serveSite(name, ip string, cert tls.Certificate) {
	var ln net.Listener
	inNS(f.t, f.ns, func() (err error) {
		ln, err = net.Listen("tcp4", ip+":443")
		return err
	})
	srv := &http.Server{Handler: f.siteHandler(name)}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	go func() { _ = srv.Serve(tl) }()
	f.t.Cleanup(func() { srv.Close() })
}

// siteHandler is what site name answers: every request is recorded and
// answered with what it carried; /ws upgrades and echoes one line.
func (f *FakeInternet) siteHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen[name] = append(f.seen[name], r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		f.mu.Unlock()
		if r.URL.Path == "/ws" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
			// Hijack sends the 101 before it stops the server's
			// background read of the connection, so the client's first
			// bytes may already be in brw's reader: read the line from
			// there, never from conn alone.
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_ = brw.Flush()
			line, _ := brw.ReadString('\n')
			fmt.Fprintf(conn, "echo:%s", line)
			return
		}
		fmt.Fprintf(w, "site=%s proto=%s auth=%s", name, r.Proto, r.Header.Get("Authorization"))
	})
}

// Requests are what site name received: "METHOD PATH Authorization".
func (f *FakeInternet) Requests(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen[name]...)
}

// ProbeRoot is a busybox root with the egress probe (tests/egressprobe,
// built from the test package's directory) at /egressprobe.
func ProbeRoot(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	probe := filepath.Join(dir, "egressprobe")
	build := exec.Command("go", "build", "-o", probe, "../egressprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the egress probe: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", "-a", fixture.BusyboxRootfs(t), root).CombinedOutput(); err != nil {
		t.Fatalf("copy busybox: %v\n%s", err, out)
	}
	if out, err := exec.Command("cp", probe, filepath.Join(root, "egressprobe")).CombinedOutput(); err != nil {
		t.Fatalf("copy the probe: %v\n%s", err, out)
	}
	return root
}

// EgressCLI runs sbx in a test host namespace joined to a fake internet,
// with a state of its own whose proxy trusts the fake internet's CA, and
// a busybox root with the egress probe.
type EgressCLI struct {
	Inet *FakeInternet
	// HostNS is the test host namespace, State the state directory (its
	// --root is Lib), Root the probe's root directory.
	HostNS, State, Lib, Root string
}

// NewEgressCLI makes an EgressCLI with a fake internet of its own.
func NewEgressCLI(t testing.TB) *EgressCLI {
	t.Helper()
	e := &EgressCLI{HostNS: HostNS(t)}
	e.Inet = NewFakeInternet(t, e.HostNS)
	e.Root = ProbeRoot(t)
	// A short state path: the executor's socket path has a length cap.
	var err error
	if e.State, err = os.MkdirTemp("", "sbxe"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(e.State) })
	// Traversable (not readable): the run root below it serves private
	// user namespaces, sbx's default.
	if err := os.Chmod(e.State, 0o711); err != nil {
		t.Fatal(err)
	}
	e.Lib = filepath.Join(e.State, "lib")
	// The fake internet's CA verifies its sites for the proxy.
	if err := os.MkdirAll(filepath.Join(e.Lib, "network"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Lib, "network", "egress-roots.pem"), e.Inet.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// Direct and passthrough connections verify the sites with it too.
	if err := os.WriteFile(filepath.Join(e.Root, "fake-ca.pem"), e.Inet.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// Command is sbx with args in the test host namespace, env added.
func (e *EgressCLI) Command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + e.HostNS, SbxBin, "--root", e.Lib, "--run-root", filepath.Join(e.State, "run")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Sbx runs sbx with args, env added, and returns its combined output.
func (e *EgressCLI) Sbx(env []string, args ...string) (string, error) {
	out, err := e.Command(env, args...).CombinedOutput()
	return string(out), err
}
