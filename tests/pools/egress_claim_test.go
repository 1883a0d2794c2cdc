package pools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// egressPool defines and fills a bridged pool of size members of the
// probe's root in e's state, removed with the test; members resolve with
// the fake internet's name server.
func egressPool(t *testing.T, e *harness.EgressCLI, name, size string) {
	t.Helper()
	if out, err := e.Sbx(nil, "pool", "create", name, "--size", size, "--network", "bridge", "--dns", "203.0.113.53", "--rootfs", e.Root); err != nil {
		t.Fatalf("pool create: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := e.Sbx(nil, "pool", "rm", name); err != nil {
			t.Errorf("pool rm: %v\n%s", err, out)
		}
		// The on-demand egress daemon leaves the bridge's state once idle.
		harness.WaitUntil(t, 60*time.Second, "no bridge state left", func() bool { return len(harness.SharedLeases(t, e.HostNS)) == 0 })
	})
	if out, err := e.Sbx(nil, "pool", "fill", name); err != nil {
		t.Fatalf("pool fill: %v\n%s", err, out)
	}
}

// claimIn creates a sandbox from the probe's root with args in e's state
// and checks that it claimed a member of pool; it is removed with the
// test, its egress state with it.
func claimIn(t *testing.T, e *harness.EgressCLI, env []string, pool string, args ...string) string {
	t.Helper()
	args = append([]string{"create", "--network", "bridge", "--dns", "203.0.113.53"}, args...)
	out, err := e.Sbx(env, append(args, "--rootfs", e.Root)...)
	if err != nil {
		t.Fatalf("create %v: %v\n%s", args, err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() {
		if out, err := e.Sbx(nil, "rm", "-f", id); err != nil {
			t.Errorf("rm: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(e.Lib, "network", "egress", id)); !os.IsNotExist(err) {
			t.Errorf("the egress state of %s is left after rm: %v", id, err)
		}
	})
	insp, err := e.Sbx(nil, "inspect", id)
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, insp)
	}
	var sbs []sbx.Sandbox
	if err := json.Unmarshal([]byte(insp), &sbs); err != nil || len(sbs) != 1 {
		t.Fatalf("inspect: %v\n%s", err, insp)
	}
	sb := sbs[0]
	if sb.FromPool != pool || sb.CreateTimings == nil || sb.CreateTimings.Pool != "hit, "+pool {
		t.Fatalf("create %v did not claim a member of %s: %+v", args, pool, sb.CreateTimings)
	}
	return id
}

// TestPoolClaimEgressPolicyAndSecret claims members of a bridged pool
// against a fake internet. The first claim, with a policy file (api.test
// only, GETs only) and a secret bound to api.test: the allowed name is
// reached, with the secret's value swapped in on the way while the
// sandbox holds only a placeholder; another name and a direct address are
// refused, and so is a POST. The next claimant, asking for none of it,
// has no placeholder, no CA, no egress state, and reaches what the pool's
// own policy allows.
func TestPoolClaimEgressPolicyAndSecret(t *testing.T) {
	e := harness.NewEgressCLI(t)
	egressPool(t, e, "eg", "2")
	const value = "claimed-secret-value-never-in-the-sandbox"
	policy := filepath.Join(e.State, "policy.yaml")
	if err := os.WriteFile(policy, []byte("allow: [api.test]\nhosts:\n  api.test:\n    rules: [\"GET /**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := claimIn(t, e, []string{"API_KEY=" + value}, "eg", "--egress-policy", policy, "--secret", "API_KEY@api.test")
	probe := func(id string, args ...string) (string, error) {
		out, err := e.Sbx(nil, append([]string{"exec", id}, args...)...)
		t.Logf("%v: %s", args, strings.TrimSpace(out))
		return strings.TrimSpace(out), err
	}

	env, err := probe(id, "env")
	if err != nil {
		t.Fatal(err)
	}
	ph := regexp.MustCompile(`API_KEY=(sbx-ph-[a-z2-7]{32})`).FindStringSubmatch(env)
	if ph == nil || strings.Contains(env, value) || !strings.Contains(env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") ||
		!strings.Contains(env, "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/sbx-egress-ca.pem") {
		t.Fatalf("the claimed sandbox's environment:\n%s", env)
	}
	placeholder := ph[1]
	// The allowed name, through the proxy's inspection (the sandbox
	// verifies it against the CA the claim gave it): the host gets the
	// value, the sandbox sees the placeholder echoed back.
	got, err := probe(id, "/egressprobe", "get", "https://api.test/echo", "Authorization:Bearer $API_KEY")
	if err != nil || !strings.Contains(got, "status=200") || !strings.Contains(got, "auth=Bearer "+placeholder) || strings.Contains(got, value) {
		t.Errorf("the allowed name with the secret: %v %s", err, got)
	}
	if reqs := e.Inet.Requests("api.test"); len(reqs) != 1 || reqs[0] != "GET /echo Bearer "+value {
		t.Errorf("api.test received %q, want the secret's value once", reqs)
	}
	// A POST the policy's rule does not allow.
	if got, _ := probe(id, "/egressprobe", "post", "https://api.test/post"); !strings.Contains(got, "status=403") {
		t.Errorf("POST on a GET-only host: %s", got)
	}
	// Another name, and the allowed host's address dialled directly.
	if got, err := probe(id, "/egressprobe", "get", "https://other.test/other"); err == nil {
		t.Errorf("another name answered: %s", got)
	}
	if got, err := probe(id, "/egressprobe", "get", "https://203.0.113.10/direct"); err == nil {
		t.Errorf("a direct address answered: %s", got)
	}
	if reqs := e.Inet.Requests("api.test"); len(reqs) != 1 {
		t.Errorf("api.test received %q after the refused requests, want only the first", reqs)
	}
	if reqs := e.Inet.Requests("other.test"); len(reqs) != 0 {
		t.Errorf("other.test received %q", reqs)
	}
	// The value is in the claimant's 0600 egress state only, not in its
	// record or anywhere else of the state.
	_ = filepath.WalkDir(e.State, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeType != 0 || strings.HasSuffix(p, "/secrets.json") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), value) {
			t.Errorf("%s holds the secret's value", p)
		}
		return nil
	})
	if fi, err := os.Stat(filepath.Join(e.Lib, "network", "egress", id, "secrets.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the claimant's secrets file: %v %v", fi, err)
	}
	// commit and diff leave the CA the claim wrote out.
	if diff, err := e.Sbx(nil, "diff", id); err != nil || strings.Contains(diff, "ssl") {
		t.Errorf("diff of the claimed sandbox: %v\n%s", err, diff)
	}

	// The next claimant: nothing of the first one's.
	next := claimIn(t, e, nil, "eg")
	env, err = probe(next, "sh", "-c", "env; cat /etc/ssl/certs/sbx-egress-ca.pem /etc/ssl/certs/ca-certificates.crt 2>&1")
	if err == nil || strings.Contains(env, "API_KEY") || strings.Contains(env, "SSL_CERT_FILE") || strings.Contains(env, "BEGIN CERTIFICATE") {
		t.Errorf("the next claimant sees the first one's placeholder or CA: %v\n%s", err, env)
	}
	if _, err := os.Stat(filepath.Join(e.Lib, "network", "egress", next)); !os.IsNotExist(err) {
		t.Errorf("the next claimant has egress state: %v", err)
	}
	// The pool's policy (the default: the internet) lets it reach
	// other.test directly, verified with the fake internet's CA.
	got, err = e.Sbx(nil, "exec", "-e", "SSL_CERT_FILE=/fake-ca.pem", next, "/egressprobe", "get", "https://other.test/next", "Authorization:Bearer $API_KEY")
	if err != nil || !strings.Contains(got, "status=200") {
		t.Errorf("the next claimant, under the pool's policy: %v %s", err, got)
	}
	if reqs := e.Inet.Requests("other.test"); len(reqs) != 1 || reqs[0] != "GET /next Bearer " {
		t.Errorf("other.test received %q, want one request without a secret", reqs)
	}
}

// TestPoolClaimEgressAllowList: a claim's CIDR allow-list holds inside
// the claimed member: the listed address is reached, another refused,
// while the pool's next member, claimed without one, reaches both.
func TestPoolClaimEgressAllowList(t *testing.T) {
	e := harness.NewEgressCLI(t)
	egressPool(t, e, "cidr", "2")
	reach := func(id string) string {
		out, err := e.Sbx(nil, "exec", id, "sh", "-c",
			"for a in 203.0.113.10 203.0.113.11; do if nc -w 3 $a 443 </dev/null; then echo $a=open; else echo $a=shut; fi; done")
		if err != nil {
			t.Fatalf("exec: %v\n%s", err, out)
		}
		return out
	}
	id := claimIn(t, e, nil, "cidr", "--egress", "203.0.113.10/32")
	if got := reach(id); !strings.Contains(got, "203.0.113.10=open") || !strings.Contains(got, "203.0.113.11=shut") {
		t.Errorf("a claim allowed only 203.0.113.10/32:\n%s", got)
	}
	next := claimIn(t, e, nil, "cidr")
	if got := reach(next); !strings.Contains(got, "203.0.113.10=open") || !strings.Contains(got, "203.0.113.11=open") {
		t.Errorf("the next claimant, under the pool's policy:\n%s", got)
	}
}

// A claim whose egress set-up fails (the image's CA bundle is too large
// to add the egress CA to) fails, and lets the network go: the member is
// removed (which changes the network) instead of the claim hanging on the
// network's lock, which it held for a change it never made, and later
// creates go on.
func TestPoolClaimEgressFailureReleasesTheNetwork(t *testing.T) {
	e := harness.NewEgressCLI(t)
	bundle := filepath.Join(e.Root, "etc/ssl/certs/ca-certificates.crt")
	if err := os.MkdirAll(filepath.Dir(bundle), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(bundle, 9<<20); err != nil { // sparse, over the 8 MiB cap
		t.Fatal(err)
	}
	egressPool(t, e, "big", "1")
	policy := filepath.Join(e.State, "policy.yaml")
	if err := os.WriteFile(policy, []byte("allow: [api.test]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A secret bound to the allowed name: its traffic is inspected, so
	// the claim adds the egress CA to the sandbox's bundles.
	cmd := e.Command([]string{"API_KEY=value"}, "create", "--network", "bridge", "--dns", "203.0.113.53", "--egress-policy", policy,
		"--secret", "API_KEY@api.test", "--rootfs", e.Root)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			_, _ = e.Sbx(nil, "rm", "-f", strings.TrimSpace(out.String()))
		}
		if err == nil || !strings.Contains(out.String(), "larger than") {
			t.Fatalf("a claim whose CA bundle is too large: %v\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the claim still runs after 2 minutes (it waits for the network's lock it holds)\n%s", out.String())
	}
	if ids, err := e.Sbx(nil, "ps", "-aq"); err != nil || strings.TrimSpace(ids) != "" {
		t.Fatalf("sandboxes after the failed claim: %q %v", ids, err)
	}
}
