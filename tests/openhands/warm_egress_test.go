package openhands_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/openhands"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// tlsProbe tries a TLS handshake with 203.0.113.11:443 (the fake
// internet's other.test) and prints open or shut: under a policy that
// names only api.test, the egress proxy resets it.
const tlsProbe = `python3 -c '
import socket, ssl
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
try:
    c.wrap_socket(socket.create_connection(("203.0.113.11", 443), 5), server_hostname="other.test"); print("open")
except Exception as e:
    print("shut", e)
'`

// TestOpenHandsWarmShapeEgress: a configured shape's egress policy holds
// in its runtimes' sandboxes, warm (the claim applies it to a dormant
// Agent Server) and cold, while another shape's runtimes keep the
// service's egress: over a bridge in a host stand-in joined to a fake
// internet, the shape's Agent Server cannot reach an address its policy
// does not name, the other shape's can.
func TestOpenHandsWarmShapeEgress(t *testing.T) {
	ns := harness.HostNS(t)
	harness.NewFakeInternet(t, ns)
	e := newWarmFakeEnv(t, "sbxohe", ns)
	h, ctx, dir, quiet := e.h, e.ctx, e.dir, e.log
	svc, err := openhands.New(h, openhands.Config{APIKey: "k", PublicURL: "http://127.0.0.1:1", StateDir: filepath.Join(dir, "oh"),
		Network: sbx.NetworkBridge, Logger: quiet, ReadyTimeout: 2 * time.Minute,
		WarmPools: h, Warm: openhands.WarmConfig{Size: 1, Shapes: []openhands.WarmShape{
			{Name: "llm", Egress: "api.test", StartRequest: fakeStart("good", "", map[string]string{"OH_X": "llm"})},
			{Name: "open", StartRequest: fakeStart("good", "", map[string]string{"OH_X": "open"})},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		svc.Close()
		e.teardown(t)
	}()
	var pools map[string]openhands.WarmRuntimeConfig
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		pools = map[string]openhands.WarmRuntimeConfig{}
		for _, c := range svc.WarmConfigs(ctx).Configs {
			pools[c.Name] = c
		}
		if pools["llm"].Warm.Ready == 1 && pools["open"].Warm.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shapes' dormant Agent Servers not ready within 3 minutes: %+v", pools)
		}
	}
	if pools["llm"].Warm.Egress != "api.test" || pools["open"].Warm.Egress != "" {
		t.Errorf("warm-runtime-configs' egress: llm %q, open %q", pools["llm"].Warm.Egress, pools["open"].Warm.Egress)
	}
	// check starts a session of the shape whose boot variable is x and
	// returns its sandbox and what the TLS probe says inside it.
	check := func(session, x string) (*sbx.Sandbox, string) {
		t.Helper()
		rt, err := svc.Start(fakeStart("good", session, map[string]string{"OH_X": x, "LLM_API_KEY": "k-" + session}))
		if err != nil {
			t.Fatalf("start %s: %v", session, err)
		}
		for deadline := time.Now().Add(3 * time.Minute); rt.Status != openhands.StatusRunning; time.Sleep(100 * time.Millisecond) {
			if rt, err = svc.Session(session); err != nil || (rt.Status != openhands.StatusStarting && rt.Status != openhands.StatusRunning) || time.Now().After(deadline) {
				t.Fatalf("session %s: %+v %v", session, rt, err)
			}
		}
		sb, err := h.Get(ctx, rt.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Command: tlsProbe}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sb, strings.TrimSpace(res.Stdout + res.Stderr)
	}
	sb, got := check("s-llm", "llm")
	if sb.FromPool != pools["llm"].Warm.Pool || sb.Options.Egress != "api.test" || !strings.HasPrefix(got, "shut") {
		t.Errorf("the llm shape's warm runtime: from pool %q, egress %q, other.test %s", sb.FromPool, sb.Options.Egress, got)
	}
	sb, got = check("s-open", "open")
	if sb.FromPool != pools["open"].Warm.Pool || sb.Options.Egress != "" || got != "open" {
		t.Errorf("the open shape's warm runtime: from pool %q, egress %q, other.test %s", sb.FromPool, sb.Options.Egress, got)
	}
	// A cold start of the llm shape: its pool drained first.
	if _, err := h.DrainPool(ctx, pools["llm"].Warm.Pool); err != nil {
		t.Fatal(err)
	}
	sb, got = check("s-llm-cold", "llm")
	if sb.FromPool != "" || sb.Options.Egress != "api.test" || !strings.HasPrefix(got, "shut") {
		t.Errorf("the llm shape's cold runtime: from pool %q, egress %q, other.test %s", sb.FromPool, sb.Options.Egress, got)
	}
	for _, s := range []string{"s-llm", "s-open", "s-llm-cold"} {
		rt, _ := svc.Session(s)
		if _, err := svc.Stop(ctx, rt.RuntimeID); err != nil {
			t.Errorf("stop %s: %v", s, err)
		}
	}
}
