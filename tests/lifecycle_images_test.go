package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
)

// importBusybox imports the busybox fixture as image name into the host's
// image cache and returns name.
func (h *lcHost) importBusybox(t *testing.T, name string) string {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "busybox.tar")
	if out, err := exec.Command("tar", "-C", fixture.BusyboxRootfs(t), "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	h.must(t, "import", "-q", tarball, name)
	return name
}

// Commit, then create from the new image: the state is there at once,
// deletions included, and sbx's own per-sandbox files are not.
func TestLifecycleCommit(t *testing.T) {
	h := newLCHost(t)
	h.env = []string{"SBX_PULL=never"}
	base := h.importBusybox(t, "lc-base:1")
	id := h.create(t)
	if r := h.sbx(t, "", "commit", id, "lc-new:1"); r.code == 0 || !strings.Contains(r.stderr, "base image") {
		t.Fatalf("commit of a --rootfs sandbox: code %d %q", r.code, r.stderr)
	}
	args := []string{"create", base}
	id = strings.TrimSpace(h.must(t, args...))
	h.saw(id)
	h.must(t, "exec", id, "--", "sh", "-c", "echo ready > /opt/state 2>/dev/null || (mkdir -p /opt && echo ready > /opt/state); rm /bin/vi; rm -rf /home; mkdir /home; echo only > /home/only")
	h.must(t, "commit", id, "lc-new:1")
	// The sandbox keeps running after the commit.
	if sb := h.inspect(t, id); sb.Status != "running" {
		t.Fatalf("after commit: %s", sb.Status)
	}
	h.must(t, "rm", "-f", id)

	id = strings.TrimSpace(h.must(t, "create", "--hostname", "fresh", "lc-new:1"))
	h.saw(id)
	out := h.must(t, "exec", id, "--", "sh", "-c", "cat /opt/state; ls /home; test -e /bin/vi && echo vi-back; cat /etc/hostname")
	if out != "ready\nonly\nfresh\n" {
		t.Fatalf("sandbox from the committed image sees %q", out)
	}
	// The first sandbox's executor scratch directory was not committed:
	// /tmp holds only this sandbox's own.
	if out := h.must(t, "exec", id, "--", "sh", "-c", "ls -a /tmp | grep -c '^.sbx-executor-'"); out != "1\n" {
		t.Fatalf("executor scratch directories in /tmp of the committed image's sandbox: %q, want 1", out)
	}
	// sbx run takes the committed image like any other.
	if out := h.must(t, "run", "lc-new:1", "sh", "-c", "cat /opt/state; ls /home; test -e /bin/vi && echo vi-back; true"); out != "ready\nonly\n" {
		t.Fatalf("sbx run of the committed image sees %q", out)
	}
	if _, err := os.Stat(filepath.Join(fixture.BusyboxRootfs(t), "opt/state")); err == nil {
		t.Fatal("commit wrote into the fixture")
	}
}

// The hash-keyed preparation runs once; the second call finds its image.
func TestLifecyclePrepareCached(t *testing.T) {
	h := newLCHost(t)
	h.env = []string{"SBX_PULL=never"}
	base := h.importBusybox(t, "lc-base:1")
	script := "echo building; echo 1 >> /counter; mkdir -p /app && echo tool > /app/tool"
	r := h.sbx(t, "", "prepare", "-c", script, base)
	if r.code != 0 || !strings.Contains(r.stderr, "building") {
		t.Fatalf("first prepare: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	img := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(img, "sbx-prepared:") {
		t.Fatalf("prepare printed %q", img)
	}
	r = h.sbx(t, "", "prepare", "-c", script, base)
	if r.code != 0 || strings.TrimSpace(r.stdout) != img || strings.Contains(r.stderr, "building") || !strings.Contains(r.stderr, "found in the cache") {
		t.Fatalf("second prepare ran again or named another image: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// Another script is another image.
	if other := strings.TrimSpace(h.must(t, "prepare", "-q", "-c", script+"; true", base)); other == img {
		t.Fatal("a different script mapped to the same prepared image")
	}
	id := strings.TrimSpace(h.must(t, "create", img))
	h.saw(id)
	if out := h.must(t, "exec", id, "--", "cat", "/counter", "/app/tool"); out != "1\ntool\n" {
		t.Fatalf("sandbox from the prepared image sees %q", out)
	}
	// A failing script makes no image and leaves no sandbox.
	if r := h.sbx(t, "", "prepare", "-c", "echo broken >&2; exit 3", base); r.code == 0 || !strings.Contains(r.stderr, "broken") {
		t.Fatalf("failing prepare: code %d %q", r.code, r.stderr)
	}
	if ids := strings.Fields(h.must(t, "ps", "-aq")); len(ids) != 1 {
		t.Fatalf("prepare left sandboxes: %v", ids)
	}
}
