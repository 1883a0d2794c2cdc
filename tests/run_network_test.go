package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
)

var testNSCount atomic.Int64

// testHostNS creates a network namespace that stands in for the host, so
// that bridge networking never touches the machine's real interfaces.
func testHostNS(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sbxt-%d-%d", os.Getpid(), testNSCount.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	return name
}

func TestRunBridgeNetwork(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	ns := testHostNS(t)
	state := t.TempDir()
	sbx := func(args ...string) (string, error) {
		cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, sbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := sbx("run", "--network", "bridge", "--hostname", "web", "--dns", "203.0.113.53", "--rootfs", root, "--",
		"sh", "-c", "ip -4 -o addr show eth0; ip route; cat /etc/resolv.conf; grep web /etc/hosts; ping -c1 -W2 $(ip route | awk '/default/ {print $3}') >/dev/null && echo gateway=reachable || echo gateway=blocked")
	if err != nil {
		t.Fatalf("bridged run: %v\n%s", err, out)
	}
	for _, want := range []string{"eth0", "inet 10.", "default via 10.", "nameserver 203.0.113.53", "web", "gateway=blocked"} {
		if !strings.Contains(out, want) {
			t.Errorf("bridged sandbox: missing %q in:\n%s", want, out)
		}
	}
	// The sandbox's veth and lease are gone after the run; the bridge stays.
	links, _ := exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if strings.Count(string(links), "sbx") != 1 {
		t.Errorf("after the run the test host has links:\n%s", links)
	}
	for _, l := range sharedLeases(t, ns) {
		t.Errorf("leftover %s", l)
	}
	// A bridged run whose sbx is killed: sbx gc releases its lease and veth.
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, sbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run"),
		"run", "--network", "bridge", "--rootfs", root, "--", "sleep", "106")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return countHostProcesses(t, "sleep 106") == 1 })
	cmd.Process.Kill()
	cmd.Wait()
	if out, err := sbx("gc"); err != nil {
		t.Fatalf("gc: %v\n%s", err, out)
	}
	links, _ = exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if strings.Count(string(links), "sbx") != 1 {
		t.Errorf("after a killed run and gc the test host has links:\n%s", links)
	}
	for _, l := range sharedLeases(t, ns) {
		t.Errorf("leftover %s after gc", l)
	}
	// Bad network flags fail clearly and change nothing.
	if out, err := sbx("run", "--network", "none", "-p", "8080:80", "--rootfs", root, "true"); err == nil || !strings.Contains(out, "bridge") {
		t.Errorf("-p without bridge: %v %s", err, out)
	}
	if out, err := sbx("run", "--network", "bogus", "--rootfs", root, "true"); err == nil || !strings.Contains(out, "network") {
		t.Errorf("--network bogus: %v %s", err, out)
	}
}

// httpClientInNS returns an HTTP client whose connections are made inside
// the network namespace at nsPath (a socket keeps the namespace it was
// created in).
func httpClientInNS(t testing.TB, nsPath string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // the thread is left to die: it changed namespace
			target, err := os.Open(nsPath)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", nsPath, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}
