package network

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestEgressInspectionAndSecrets drives a bridged sandbox through the
// egress proxy to a fake internet: HTTP/2 and a WebSocket through an
// inspected host, and a secret that reaches its host but never the
// sandbox (environment, files, process memory) nor another host.
func TestEgressInspectionAndSecrets(t *testing.T) {
	e := harness.NewEgressCLI(t)
	inet, lib, sbx := e.Inet, e.Lib, e.Sbx
	const value = "s3cr3t-value-that-must-never-enter-the-sandbox"
	var out string
	var err error
	// other.test is inspected too (a secret of its own is bound to it),
	// so the proxy sees what the sandbox sends there.
	// api.test allows only GETs (an L7 rule of the policy file).
	// The image's own bundle, to which sbx appends its CA (an export
	// gives it back as it was).
	const imageBundle = "# the image's bundle\n"
	if err := os.MkdirAll(filepath.Join(e.Root, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Root, "etc/ssl/certs/ca-certificates.crt"), []byte(imageBundle), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(e.State, "policy.yaml")
	if err := os.WriteFile(policy, []byte("allow: [api.test, other.test]\nhosts:\n  api.test:\n    rules: [\"GET /**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = sbx([]string{"API_KEY=" + value, "OTHER_KEY=other-value"}, "create", "--network", "bridge", "--dns", "203.0.113.53",
		"--egress-policy", policy, "--secret", "API_KEY@api.test", "--secret", "OTHER_KEY@other.test", "--rootfs", e.Root)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() {
		if out, err := sbx(nil, "rm", "-f", id); err != nil {
			t.Errorf("rm: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(lib, "network", "egress", id)); !os.IsNotExist(err) {
			t.Errorf("the sandbox's egress state is left after rm: %v", err)
		}
	})
	probe := func(args ...string) string {
		t.Helper()
		out, err := sbx(nil, append([]string{"exec", id, "/egressprobe"}, args...)...)
		if err != nil {
			t.Fatalf("probe %v: %v\n%s", args, err, out)
		}
		t.Logf("probe %v: %s", args, strings.TrimSpace(out))
		return strings.TrimSpace(out)
	}

	// The sandbox holds a placeholder, and trusts its CA.
	env, err := sbx(nil, "exec", id, "env")
	if err != nil {
		t.Fatalf("env: %v\n%s", err, env)
	}
	ph := regexp.MustCompile(`API_KEY=(sbx-ph-[a-z2-7]{32})`).FindStringSubmatch(env)
	if ph == nil || strings.Contains(env, value) || !strings.Contains(env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
		t.Fatalf("sandbox environment:\n%s", env)
	}
	placeholder := ph[1]

	// HTTP/2 through the inspected host, the proxy's certificate verified
	// by the sandbox against the CA sbx gave it.
	if got := probe("get", "https://api.test/v1/models"); !strings.Contains(got, "status=200 proto=HTTP/2.0") || !strings.Contains(got, "site=api.test proto=HTTP/2.0") {
		t.Errorf("h2 through inspection: %s", got)
	}
	// A WebSocket upgrade and a line each way.
	if got := probe("ws", "api.test", "/ws"); got != "status=101 echo=echo:ping over the upgrade" {
		t.Errorf("websocket through inspection: %s", got)
	}
	// A POST no rule allows is refused before it reaches the host.
	if got := probe("post", "https://api.test/v1/messages"); !strings.Contains(got, "status=403") || !strings.Contains(got, "no rule") {
		t.Errorf("POST on a GET-only host: %s", got)
	}
	for _, r := range inet.Requests("api.test") {
		if strings.HasPrefix(r, "POST") {
			t.Errorf("api.test received %q", r)
		}
	}
	// The secret reaches its host; the host's echo of it comes back as
	// the placeholder.
	got := probe("get", "https://api.test/echo", "Authorization:Bearer $API_KEY")
	if !strings.Contains(got, "status=200") || strings.Contains(got, value) || !strings.Contains(got, "auth=Bearer "+placeholder) {
		t.Errorf("secret request, sandbox side: %s", got)
	}
	if reqs := inet.Requests("api.test"); len(reqs) == 0 || reqs[len(reqs)-1] != "GET /echo Bearer "+value {
		t.Errorf("api.test received %q", reqs)
	}
	// The placeholder towards another allowed host is refused there.
	got = probe("get", "https://other.test/steal", "Authorization:Bearer $API_KEY")
	if !strings.Contains(got, "status=403") {
		t.Errorf("placeholder to other.test: %s", got)
	}
	for _, r := range inet.Requests("other.test") {
		if strings.Contains(r, value) || strings.Contains(r, placeholder) {
			t.Errorf("other.test received %q", r)
		}
	}

	// One audit event per request, none with the value.
	harness.WaitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(lib, "network", "egress-audit.jsonl"))
		return bytes.Contains(b, []byte(`"kind":"request"`)) && bytes.Contains(b, []byte(`"path":"/steal"`))
	})
	audit, _ := os.ReadFile(filepath.Join(lib, "network", "egress-audit.jsonl"))
	var requests, denied, deniedPost int
	for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
		var ev struct{ Kind, Name, Decision, Path string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if ev.Kind == "request" {
			requests++
			if ev.Name == "other.test" && ev.Path == "/steal" && ev.Decision == "deny" {
				denied++
			}
			if ev.Name == "api.test" && ev.Path == "/v1/messages" && ev.Decision == "deny" {
				deniedPost++
			}
		}
	}
	if requests != 5 || denied != 1 || deniedPost != 1 {
		t.Errorf("audit: %d request events (want 5: 4 to api.test, the upgrade and the POST among them, 1 to other.test), %d denied /steal, %d denied POST:\n%s", requests, denied, deniedPost, audit)
	}

	// Nothing in the sandbox holds the value: its processes' memory (a
	// holder keeps the environment alive), its files, its record.
	hold := e.Command(nil, "exec", id, "/egressprobe", "hold")
	stdout := &bytes.Buffer{}
	hold.Stdout = stdout
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Process.Kill(); hold.Wait() })
	harness.WaitFor(t, func() bool { return strings.Contains(stdout.String(), "ready") })
	pids := sandboxPIDs(t, placeholder)
	if len(pids) < 2 {
		t.Fatalf("sandbox processes %v: want the executor and the holder", pids)
	}
	if found := scanMemory(t, pids, []byte(value)); len(found) > 0 {
		t.Errorf("the secret's value is in the sandbox's memory: %v", found)
	}
	if found := scanMemory(t, pids, []byte(placeholder)); len(found) == 0 {
		t.Error("the memory scan finds not even the placeholder: it scans nothing")
	}
	tarball := filepath.Join(e.State, "export.tar")
	if out, err := sbx(nil, "export", "-o", tarball, id); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(tarball); len(b) == 0 || bytes.Contains(b, []byte(value)) {
		t.Errorf("the sandbox's files (export, %d bytes) hold the value", len(b))
	}
	// The export has the image's bundle as it was and nothing of the CA.
	caPEM, err := os.ReadFile(filepath.Join(lib, "network", "egress", id, "egress-ca.pem"))
	if err != nil || !bytes.Contains(caPEM, []byte("BEGIN CERTIFICATE")) {
		t.Fatalf("the sandbox's CA: %v", err)
	}
	exported := map[string]string{}
	tf, _ := os.Open(tarball)
	tr := tar.NewReader(tf)
	for {
		hdr, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				t.Errorf("export tar: %v", err)
			}
			break
		}
		b, _ := io.ReadAll(tr)
		if _, dup := exported[hdr.Name]; dup {
			t.Errorf("export has %s twice", hdr.Name)
		}
		exported[hdr.Name] = string(b)
		if bytes.Contains(b, caPEM) {
			t.Errorf("export's %s holds the sandbox's CA", hdr.Name)
		}
	}
	tf.Close()
	if got, ok := exported["etc/ssl/certs/ca-certificates.crt"]; !ok || got != imageBundle {
		t.Errorf("export's bundle: %v %q, want the image's", ok, got)
	}
	if _, ok := exported["etc/ssl/certs/sbx-egress-ca.pem"]; ok || exported["egressprobe"] == "" {
		t.Errorf("export: the CA file is there (%v) or the probe is not", ok)
	}
	// The CA sbx wrote into the root is no change of the sandbox's.
	// (Its parent directories, copied up to hold the appended bundle,
	// show as changed.)
	if diff, err := sbx(nil, "diff", id); err != nil || strings.Contains(diff, "certs") {
		t.Errorf("diff: %v\n%s", err, diff)
	}
	if ca, err := sbx(nil, "exec", id, "cat", "/etc/ssl/certs/sbx-egress-ca.pem"); err != nil || !strings.Contains(ca, "BEGIN CERTIFICATE") || strings.Contains(ca, "PRIVATE") {
		t.Errorf("the sandbox's CA file: %v\n%s", err, ca)
	}
	insp, err := sbx(nil, "inspect", id)
	if err != nil || strings.Contains(insp, value) || !json.Valid([]byte(insp)) {
		t.Errorf("inspect: %v, holds the value: %v", err, strings.Contains(insp, value))
	}
	// On the host, only the 0600 secrets file of the egress state has it.
	_ = filepath.WalkDir(e.State, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeType != 0 || strings.HasSuffix(p, "/secrets.json") || p == tarball {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the secret's value", p)
		}
		return nil
	})
	fi, err := os.Stat(filepath.Join(lib, "network", "egress", id, "secrets.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets file: %v %v", fi, err)
	}
}
