package network

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestEgressDNSOverTCP: a sandbox's DNS over TCP goes to the egress
// resolver as its UDP does: an allowed name resolves (the resolver asks
// upstream), another is refused and audited.
func TestEgressDNSOverTCP(t *testing.T) {
	e := harness.NewEgressCLI(t)
	out, err := e.Sbx(nil, "create", "--network", "bridge", "--dns", "203.0.113.53", "--egress", "api.test", "--rootfs", e.Root)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() {
		if out, err := e.Sbx(nil, "rm", "-f", id); err != nil {
			t.Errorf("rm: %v\n%s", err, out)
		}
	})
	if out, err := e.Sbx(nil, "exec", id, "/egressprobe", "dnstcp", "api.test"); err != nil || strings.TrimSpace(out) != "addrs=203.0.113.10" {
		t.Errorf("api.test over TCP: %v %s", err, out)
	}
	if out, err := e.Sbx(nil, "exec", id, "/egressprobe", "dnstcp", "other.test"); err == nil || strings.Contains(out, "addrs=") {
		t.Errorf("other.test over TCP: %v %s", err, out)
	}
	harness.WaitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(e.Lib, "network", "egress-audit.jsonl"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"kind":"dns"`) && strings.Contains(line, `"name":"other.test"`) && strings.Contains(line, `"decision":"deny"`) {
				return true
			}
		}
		return false
	})
}

// TestEgressDecisionMetrics: the server's /metrics counts the decisions
// of the egress daemon it runs, by kind and decision: two refused
// lookups of other.test (at least two decisions; a resolver may ask for
// A and AAAA).
func TestEgressDecisionMetrics(t *testing.T) {
	fixture.BusyboxRootfs(t)
	ns := harness.HostNS(t)
	harness.NewFakeInternet(t, ns)
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: "/run/netns/" + ns}, nil)
	ctx := context.Background()
	sb, err := e.C.Create(ctx, sbx.Options{Rootfs: fixture.CacheDir + "/busybox", Network: sbx.NetworkBridge, Egress: "api.test", DNS: []string{"203.0.113.53"}})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: "nslookup api.test; nslookup other.test; nslookup other.test"}, nil)
	if err != nil || !strings.Contains(res.Stdout, "203.0.113.10") {
		t.Fatalf("lookups: %+v %v", res, err)
	}
	count := func(kind, decision string) int {
		body := harness.MustRaw(t, e, http.StatusOK, "GET", "/metrics", "", nil)
		m := regexp.MustCompile(`(?m)^sbx_egress_decisions_total\{decision="` + decision + `",kind="` + kind + `"\} (\d+)$`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	harness.WaitFor(t, func() bool { return count("dns", "deny") >= 2 })
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}
