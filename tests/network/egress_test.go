package network

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// egressInternet adds to the test host namespace ns an "internet"
// namespace on 203.0.113.0/24 with a name server (203.0.113.53, zone
// "test.") and two web sites: allowed.test (203.0.113.10) and evil.test
// (203.0.113.20). It returns a function listing the names the name server
// was asked.
func egressInternet(t *testing.T, ns string) func() []string {
	inet := ns + "-inet"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	run("ip", "netns", "add", inet)
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", inet).Run() })
	run("ip", "-n", ns, "link", "add", "uplink", "type", "veth", "peer", "name", "eth0", "netns", inet)
	run("ip", "-n", ns, "addr", "add", "203.0.113.1/24", "dev", "uplink")
	run("ip", "-n", ns, "link", "set", "uplink", "up")
	for _, a := range []string{"203.0.113.2/24", "203.0.113.10/32", "203.0.113.20/32", "203.0.113.53/32"} {
		run("ip", "-n", inet, "addr", "add", a, "dev", "eth0")
	}
	run("ip", "-n", inet, "link", "set", "eth0", "up")
	run("ip", "-n", inet, "link", "set", "lo", "up")
	inetPath := "/run/netns/" + inet
	for ip, body := range map[string]string{"203.0.113.10": "allowed-site", "203.0.113.20": "evil-site"} {
		var ln net.Listener
		if err := netns.InNamespacePath(inetPath, func() (err error) { ln, err = net.Listen("tcp4", ip+":80"); return err }); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, body+"\n")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	var pc net.PacketConn
	if err := netns.InNamespacePath(inetPath, func() (err error) { pc, err = net.ListenPacket("udp4", "203.0.113.53:53"); return err }); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	zone := map[string]string{"allowed.test.": "203.0.113.10", "evil.test.": "203.0.113.20"}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		mu.Lock()
		asked = append(asked, name)
		mu.Unlock()
		if ip, ok := zone[name]; ok && q.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR(name + " 30 IN A " + ip)
			m.Answer = append(m.Answer, rr)
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
}

// TestEgressByNameCLI runs a sandbox whose --egress names one host: sbx
// starts the bridge's egress daemon (sbx egressd) before the command,
// the allowed name resolves and answers, the other name is refused by the
// resolver (never asked upstream) and the proxy, and every decision is
// audited; the daemon exits once no sandbox needs it.
func TestEgressByNameCLI(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	ns := harness.HostNS(t)
	asked := egressInternet(t, ns)
	state := harness.ReachableTempDir(t)
	lib := filepath.Join(state, "lib")
	sbx := func(args ...string) (string, error) {
		cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, harness.SbxBin, "--root", lib, "--run-root", filepath.Join(state, "run")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// busybox's own resolver (nslookup) and raw HTTP over nc: its static
	// wget cannot resolve names.
	get := func(ip, host string) string {
		return fmt.Sprintf("printf 'GET / HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' | nc -w 5 %s 80", host, ip)
	}
	out, err := sbx("run", "--network", "bridge", "--egress", "allowed.test", "--dns", "203.0.113.53", "--rootfs", root, "--", "sh", "-c",
		"nslookup allowed.test; "+get("$(nslookup allowed.test | awk '/^Address/ {a=$NF} END {print a}')", "allowed.test")+"; "+
			"nslookup evil.test || echo evil-name=refused; "+
			"echo evil-host=$("+get("203.0.113.20", "evil.test")+" | grep -c HTTP/); "+
			get("203.0.113.20", "allowed.test")+"; "+
			"echo evil-address=$("+get("203.0.113.20", "203.0.113.20")+" | grep -c HTTP/)")
	if err != nil {
		t.Fatalf("run with --egress allowed.test: %v\n%s", err, out)
	}
	// allowed-site twice: by name, and by name sent to the evil address
	// (the proxy connects to the name's address, not the one chosen).
	if n := strings.Count(out, "allowed-site"); n != 2 {
		t.Errorf("allowed-site %d times, want 2, in:\n%s", n, out)
	}
	for _, want := range []string{"evil-name=refused", "evil-host=0", "evil-address=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, bad := range []string{"evil-site"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q in:\n%s", bad, out)
		}
	}
	for _, q := range asked() {
		if strings.Contains(q, "evil") {
			t.Errorf("the name server was asked %s", q)
		}
	}
	// The daemon audited the allowed connection and the refusals.
	data, err := os.ReadFile(filepath.Join(lib, "network", "egress-audit.jsonl"))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev egress.AuditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		seen[fmt.Sprintf("%s %s %s", ev.Kind, ev.Name, ev.Decision)] = true
	}
	for _, want := range []string{"connection allowed.test allow", "dns evil.test deny"} {
		if !seen[want] {
			t.Errorf("audit lacks %q: %s", want, data)
		}
	}
	// The on-demand daemon goes once no sandbox needs it.
	daemon := strings.Join([]string{harness.SbxBin, "--root", lib, "--run-root", filepath.Join(state, "run"), "--log-level", "warn", "egressd"}, " ")
	harness.WaitUntil(t, 60*time.Second, "the egress daemon exits when idle", func() bool { return countProcesses(daemon) == 0 })
	// Its lock file does not keep the bridge's state directory.
	for _, l := range harness.SharedLeases(t, ns) {
		t.Errorf("leftover %s", l)
	}
}

// countProcesses counts the processes whose command line is cmdline.
func countProcesses(cmdline string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")) == cmdline {
			n++
		}
	}
	return n
}
