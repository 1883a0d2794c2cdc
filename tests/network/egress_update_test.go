package network

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestEgressSetLive changes a running sandbox's policy by name through the
// REST API of an in-process server (which runs the egress daemon itself):
// the new name is reachable and the old one refused at the next
// connection, and a bad policy changes nothing.
func TestEgressSetLive(t *testing.T) {
	fixture.BusyboxRootfs(t)
	ns := harness.HostNS(t)
	egressInternet(t, ns)
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: "/run/netns/" + ns}, nil)
	ctx := context.Background()
	o := harness.BusyboxCreate("egress-live")
	o.Network, o.Egress, o.DNS, o.Cmd = sbx.NetworkBridge, "allowed.test", []string{"203.0.113.53"}, []string{"sleep", "600"}
	sb, err := e.C.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	defer e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	// fetch asks for http://NAME/ by the name's address (busybox's own
	// resolver) and prints the site's answer or "NAME=refused".
	fetch := func(name string) string {
		t.Helper()
		script := fmt.Sprintf("ip=$(nslookup %[1]s 2>/dev/null | awk '/^Address/ {a=$NF} END {print a}'); "+
			"out=$(printf 'GET / HTTP/1.0\\r\\nHost: %[1]s\\r\\n\\r\\n' | nc -w 5 ${ip:-203.0.113.20} 80 | tail -n1); echo ${out:-%[1]s=refused}", name)
		r, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"sh", "-c", script}}, nil)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		return strings.TrimSpace(r.Stdout)
	}
	if got := fetch("allowed.test"); got != "allowed-site" {
		t.Fatalf("allowed.test under the first policy: %q", got)
	}
	if got := fetch("evil.test"); got != "evil.test=refused" {
		t.Fatalf("evil.test under the first policy: %q", got)
	}
	sb, err = e.C.SetEgress(ctx, sb.ID, sbx.EgressUpdate{Egress: "evil.test"})
	if err != nil {
		t.Fatalf("set egress: %v", err)
	}
	if sb.Options.Egress != "evil.test" {
		t.Errorf("record after the change: egress %q", sb.Options.Egress)
	}
	if got := fetch("evil.test"); got != "evil-site" {
		t.Errorf("evil.test after the change: %q", got)
	}
	if got := fetch("allowed.test"); got != "allowed.test=refused" {
		t.Errorf("allowed.test after the change: %q", got)
	}
	// Bad input: a clear error, nothing changed.
	if _, err := e.C.SetEgress(ctx, sb.ID, sbx.EgressUpdate{Egress: "*.com"}); !errors.Is(err, sbx.ErrInvalid) {
		t.Errorf("set egress *.com: %v, want ErrInvalid", err)
	}
	if got := fetch("evil.test"); got != "evil-site" {
		t.Errorf("evil.test after a refused change: %q", got)
	}
	if got, _ := e.C.Get(ctx, sb.ID); got == nil || got.Options.Egress != "evil.test" {
		t.Errorf("record after a refused change: %+v", got)
	}
}
