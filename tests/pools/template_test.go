package pools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestPoolTemplate: an image built from a Dockerfile, with a start command
// and a ready command (sbx pool create --start --ready), makes a template
// whose members are claimable only once the ready command passes: a fill
// waits for it, a create with the same command claims a member whose
// server is already up, and a ready command that never passes, or a start
// command that ends, leaves no member.
func TestPoolTemplate(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "tpl-base:1")
	ctx := t.TempDir()
	dockerfile := "FROM " + base + "\nRUN mkdir -p /srv && echo hello > /srv/index\nCOPY <<'EOF' /srv/start\n" +
		"sleep 1\necho up > /tmp/up\nexec sleep 1000\nEOF\n"
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "build", "-t", "tpl:1", ctx)
	start := "sh /srv/start"
	h.Must(t, "pool", "create", "tpl", "--size", "1", "--start", start, "--ready", "test -f /tmp/up", "tpl:1")
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "tpl") })
	t0 := time.Now()
	h.Must(t, "pool", "fill", "tpl")
	if d := time.Since(t0); d < time.Second {
		t.Fatalf("the fill returned after %s, before the start command could be ready", d)
	}
	members := idle(h, t)
	if len(members) != 1 {
		t.Fatalf("idle members after the fill: %v", members)
	}
	h.Saw(members[0])
	// The claim gets the member with its start command's work done.
	id := strings.TrimSpace(h.Must(t, "create", "tpl:1", "/bin/sh", "-c", start))
	h.Saw(id)
	if sb := h.Inspect(t, id); sb.FromPool != "tpl" || id != members[0] {
		t.Fatalf("the create did not claim the template's member: %s from %q: %+v", id, sb.FromPool, sb.CreateTimings)
	}
	if out := h.Must(t, "exec", id, "cat", "/tmp/up", "/srv/index"); out != "up\nhello\n" {
		t.Fatalf("the claimed member: %q", out)
	}
	h.Must(t, "rm", "-f", id)

	// A ready command that never passes, and a start command that ends
	// first: the fill fails saying why, and no member is left.
	h.Must(t, "pool", "create", "never", "--size", "1", "--start", "exec sleep 1000", "--ready", "echo not yet >&2; exit 1", "--ready-timeout", "2s", "tpl:1")
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "never") })
	if r := h.Sbx(t, "", "pool", "fill", "never"); r.Code == 0 || !strings.Contains(r.Stderr, "did not pass within 2s") || !strings.Contains(r.Stderr, "not yet") {
		t.Fatalf("fill with a ready command that never passes: %d %s", r.Code, r.Stderr)
	}
	h.Must(t, "pool", "create", "ends", "--size", "1", "--start", "exit 3", "--ready", "false", "tpl:1")
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "ends") })
	if r := h.Sbx(t, "", "pool", "fill", "ends"); r.Code == 0 || !strings.Contains(r.Stderr, "ended before its ready command passed") {
		t.Fatalf("fill with a start command that ends: %d %s", r.Code, r.Stderr)
	}
	if left := idle(h, t); len(left) != 0 {
		t.Fatalf("failed boots left members: %v", left)
	}
	// Bad flags are refused before anything is defined.
	for _, args := range [][]string{
		{"--ready", "true", "tpl:1"},
		{"--start", "true", "--ready-timeout", "1s", "tpl:1"},
		{"--start", "true", "tpl:1", "other", "cmd"},
	} {
		if r := h.Sbx(t, "", append([]string{"pool", "create", "bad", "--size", "1"}, args...)...); r.Code == 0 {
			t.Errorf("pool create %v was accepted", args)
		}
	}
}

// TestPoolImageTemplate: an image built with a HEALTHCHECK is a template
// of its own: a pool of it defined without --start and --ready boots the
// image's CMD in each member, a fill waits for the health check's command
// to pass, and sbx run -d IMAGE (docker's habit) claims a member whose
// server is already up. An image that turns its check off (HEALTHCHECK
// NONE) makes a plain pool, and one with a check and nothing to start is
// refused, saying to give --start.
func TestPoolImageTemplate(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "tpl-base:1")
	build := func(tag, dockerfile string) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			t.Fatal(err)
		}
		h.Must(t, "build", "-q", "-t", tag, dir)
	}
	build("served:1", "FROM "+base+"\nCOPY <<'EOF' /srv/start\nsleep 1\necho up > /tmp/up\nexec sleep 1000\nEOF\n"+
		"CMD [\"sh\", \"/srv/start\"]\nHEALTHCHECK --interval=30s CMD test -f /tmp/up && echo healthy\n")
	h.Must(t, "pool", "create", "served", "--size", "1", "served:1")
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "served") })
	t0 := time.Now()
	h.Must(t, "pool", "fill", "served")
	if d := time.Since(t0); d < time.Second {
		t.Fatalf("the fill returned after %s, before the image's health check could pass", d)
	}
	members := idle(h, t)
	if len(members) != 1 {
		t.Fatalf("idle members after the fill: %v", members)
	}
	h.Saw(members[0])
	id := strings.TrimSpace(h.Must(t, "run", "-d", "served:1"))
	h.Saw(id)
	if sb := h.Inspect(t, id); sb.FromPool != "served" || id != members[0] {
		t.Fatalf("sbx run -d did not claim the template's member: %s from %q", id, sb.FromPool)
	}
	if out := h.Must(t, "exec", id, "cat", "/tmp/up"); out != "up\n" {
		t.Fatalf("the claimed member's start command had not run: %q", out)
	}
	h.Must(t, "rm", "-f", id)

	// HEALTHCHECK NONE: a plain pool, claimed by a create without a command.
	build("quiet:1", "FROM served:1\nHEALTHCHECK NONE\n")
	h.Must(t, "pool", "create", "quiet", "--size", "1", "quiet:1")
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "quiet") })
	h.Must(t, "pool", "fill", "quiet")
	id = strings.TrimSpace(h.Must(t, "create", "quiet:1"))
	h.Saw(id)
	if sb := h.Inspect(t, id); sb.FromPool != "quiet" || len(sb.Options.Cmd) != 0 {
		t.Fatalf("a pool of an image without a health check: %s from %q cmd %q", id, sb.FromPool, sb.Options.Cmd)
	}
	if r := h.Sbx(t, "", "exec", id, "test", "-e", "/tmp/up"); r.Code == 0 {
		t.Fatal("a plain pool's member ran the image's start command")
	}
	h.Must(t, "rm", "-f", id)

	// A check with nothing to start: refused, no pool defined.
	build("bare:1", "FROM "+base+"\nHEALTHCHECK CMD true\n")
	if r := h.Sbx(t, "", "pool", "create", "bare", "--size", "1", "bare:1"); r.Code == 0 || !strings.Contains(r.Stderr, "--start") {
		t.Fatalf("pool of an image with a health check and no command: %d %s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "pool", "ls"); strings.Contains(out, "bare") {
		t.Fatalf("a refused pool was defined:\n%s", out)
	}
}
