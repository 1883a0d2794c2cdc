package network

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

func TestRunBridgeNetwork(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	ns := harness.HostNS(t)
	state := harness.ReachableTempDir(t)
	sbx := func(args ...string) (string, error) {
		cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, harness.SbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run")}, args...)...)
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
	for _, l := range harness.SharedLeases(t, ns) {
		t.Errorf("leftover %s", l)
	}
	// A bridged run whose sbx is killed: sbx gc releases its lease and veth.
	cmd := exec.Command("nsenter", "--net=/run/netns/"+ns, harness.SbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run"),
		"run", "--network", "bridge", "--rootfs", root, "--", "sleep", "106")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 106") == 1 })
	cmd.Process.Kill()
	cmd.Wait()
	if out, err := sbx("gc"); err != nil {
		t.Fatalf("gc: %v\n%s", err, out)
	}
	links, _ = exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if strings.Count(string(links), "sbx") != 1 {
		t.Errorf("after a killed run and gc the test host has links:\n%s", links)
	}
	for _, l := range harness.SharedLeases(t, ns) {
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
