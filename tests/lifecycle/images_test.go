package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// Commit, then create from the new image: the state is there at once,
// deletions included, and sbx's own per-sandbox files are not.
func TestLifecycleCommit(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "lc-base:1")
	id := h.Create(t)
	if r := h.Sbx(t, "", "commit", id, "lc-new:1"); r.Code == 0 || !strings.Contains(r.Stderr, "base image") {
		t.Fatalf("commit of a --rootfs sandbox: code %d %q", r.Code, r.Stderr)
	}
	args := []string{"create", base}
	id = strings.TrimSpace(h.Must(t, args...))
	h.Saw(id)
	h.Must(t, "exec", id, "--", "sh", "-c", "echo ready > /opt/state 2>/dev/null || (mkdir -p /opt && echo ready > /opt/state); rm /bin/vi; rm -rf /home; mkdir /home; echo only > /home/only")
	// What the executor's scratch directory (made by its first shell
	// session, which the CLI never starts) would look like.
	h.Must(t, "exec", id, "--", "mkdir", "/tmp/.sbx-executor-123")
	h.Must(t, "commit", id, "lc-new:1")
	// The sandbox keeps running after the commit.
	if sb := h.Inspect(t, id); sb.Status != "running" {
		t.Fatalf("after commit: %s", sb.Status)
	}
	h.Must(t, "rm", "-f", id)

	id = strings.TrimSpace(h.Must(t, "create", "--hostname", "fresh", "lc-new:1"))
	h.Saw(id)
	out := h.Must(t, "exec", id, "--", "sh", "-c", "cat /opt/state; ls /home; test -e /bin/vi && echo vi-back; cat /etc/hostname")
	if out != "ready\nonly\nfresh\n" {
		t.Fatalf("sandbox from the committed image sees %q", out)
	}
	// The first sandbox's executor scratch directory was not committed.
	if out := h.Must(t, "exec", id, "--", "sh", "-c", "ls -a /tmp | grep -c '^.sbx-executor-' || true"); out != "0\n" {
		t.Fatalf("executor scratch directories in /tmp of the committed image's sandbox: %q, want none", out)
	}
	// sbx run takes the committed image like any other.
	if out := h.Must(t, "run", "lc-new:1", "sh", "-c", "cat /opt/state; ls /home; test -e /bin/vi && echo vi-back; true"); out != "ready\nonly\n" {
		t.Fatalf("sbx run of the committed image sees %q", out)
	}
	if _, err := os.Stat(filepath.Join(fixture.BusyboxRootfs(t), "opt/state")); err == nil {
		t.Fatal("commit wrote into the fixture")
	}
}

// The hash-keyed preparation runs once; the second call finds its image.
func TestLifecyclePrepareCached(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "lc-base:1")
	script := "echo building; echo 1 >> /counter; mkdir -p /app && echo tool > /app/tool"
	r := h.Sbx(t, "", "prepare", "-c", script, base)
	if r.Code != 0 || !strings.Contains(r.Stderr, "building") {
		t.Fatalf("first prepare: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	img := strings.TrimSpace(r.Stdout)
	if !strings.HasPrefix(img, "sbx-prepared:") {
		t.Fatalf("prepare printed %q", img)
	}
	r = h.Sbx(t, "", "prepare", "-c", script, base)
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != img || strings.Contains(r.Stderr, "building") || !strings.Contains(r.Stderr, "found in the cache") {
		t.Fatalf("second prepare ran again or named another image: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	// Another script is another image.
	if other := strings.TrimSpace(h.Must(t, "prepare", "-q", "-c", script+"; true", base)); other == img {
		t.Fatal("a different script mapped to the same prepared image")
	}
	id := strings.TrimSpace(h.Must(t, "create", img))
	h.Saw(id)
	if out := h.Must(t, "exec", id, "--", "cat", "/counter", "/app/tool"); out != "1\ntool\n" {
		t.Fatalf("sandbox from the prepared image sees %q", out)
	}
	// A failing script makes no image and leaves no sandbox.
	if r := h.Sbx(t, "", "prepare", "-c", "echo broken >&2; exit 3", base); r.Code == 0 || !strings.Contains(r.Stderr, "broken") {
		t.Fatalf("failing prepare: code %d %q", r.Code, r.Stderr)
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 1 {
		t.Fatalf("prepare left sandboxes: %v", ids)
	}
}
