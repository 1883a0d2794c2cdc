package network

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRunBridgePoolAndSubnet checks `sbx network pool`, that a bridged run
// takes a pooled namespace and reports the network step, and SBX_SUBNET.
func TestRunBridgePoolAndSubnet(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	ns := harness.HostNS(t)
	state := harness.ReachableTempDir(t)
	cli := func(args ...string) (string, error) {
		cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + ns, harness.SbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run")}, args...)...)
		cmd.Env = append(os.Environ(), "SBX_SUBNET=10.77.0.0/16")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := cli("network", "pool", "drain"); err != nil {
			t.Errorf("final drain: %v\n%s", err, out)
		}
	})
	if out, err := cli("network", "pool", "fill", "2"); err != nil || !strings.Contains(out, "added 2, 2 in the pool") {
		t.Fatalf("pool fill 2: %v\n%s", err, out)
	}
	if out, err := cli("network", "pool", "fill", "1"); err != nil || !strings.Contains(out, "added 0, 2 in the pool") {
		t.Fatalf("pool fill 1 with 2 pooled: %v\n%s", err, out)
	}
	if out, err := cli("network", "pool", "ls"); err != nil || strings.TrimSpace(out) != "2" {
		t.Fatalf("pool ls: %v\n%s", err, out)
	}
	if out, err := cli("network", "pool", "fill", "many"); err == nil {
		t.Fatalf("pool fill many succeeded:\n%s", out)
	}
	report := filepath.Join(state, "report.json")
	out, err := cli("run", "--network", "bridge", "--report", report, "--rootfs", root, "--", "ip", "-4", "-o", "addr", "show", "eth0")
	if err != nil {
		t.Fatalf("bridged run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "inet 10.77.") {
		t.Errorf("SBX_SUBNET=10.77.0.0/16 not used:\n%s", out)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep sbx.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Timings.FromPool || rep.Timings.NetworkS <= 0 || !strings.Contains(string(data), `"network_s"`) {
		t.Errorf("run timings lack the pooled network step: %s", data)
	}
	if out, err := cli("network", "pool", "ls"); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("pool ls after a run: %v\n%s", err, out)
	}
	if out, err := cli("network", "pool", "drain"); err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	if out, err := cli("network", "pool", "ls"); err != nil || strings.TrimSpace(out) != "0" {
		t.Fatalf("pool ls after drain: %v\n%s", err, out)
	}
	links, _ := exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if strings.Count(string(links), "sbx") != 1 {
		t.Errorf("after drain the test host has links:\n%s", links)
	}
	if out, err := cli("network", "reset"); err != nil {
		t.Fatalf("network reset: %v\n%s", err, out)
	}
	links, _ = exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if strings.Contains(string(links), "sbx") {
		t.Errorf("after reset the test host has links:\n%s", links)
	}
	if out, err := exec.Command("nsenter", "--net=/run/netns/"+ns, harness.SbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run"),
		"network", "pool", "ls").CombinedOutput(); err != nil {
		t.Fatalf("pool ls without SBX_SUBNET: %v\n%s", err, out)
	}
	bad := exec.Command(harness.SbxBin, "--root", filepath.Join(state, "lib"), "--run-root", filepath.Join(state, "run"), "network", "pool", "ls")
	bad.Env = append(os.Environ(), "SBX_SUBNET=10.77.0.0/30")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "SBX_SUBNET") {
		t.Errorf("SBX_SUBNET=/30 accepted: %v\n%s", err, out)
	}
}
