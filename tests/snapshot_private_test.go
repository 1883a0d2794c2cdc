package tests

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
)

// A sandbox created without --userns runs in a private user namespace,
// which checkpoints do not support: checkpoint, fork, stop --checkpoint
// and create --idle-timeout fail at once saying to use --userns host, the
// sandbox runs on untouched and no snapshot is left.
func TestSnapshotRefusesPrivateUserNS(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t)
	if sb := h.inspect(t, id); sb.Options.UserNS != sbx.UserNSPrivate {
		t.Fatalf("a sandbox created without --userns has userns %q, want %q", sb.Options.UserNS, sbx.UserNSPrivate)
	}
	h.must(t, "exec", id, "--", "sh", "-c", "echo kept > /root/f")
	for _, args := range [][]string{
		{"checkpoint", id, "p1"},
		{"checkpoint", "--leave-running", id, "p2"},
		{"fork", id, "-n", "2"},
		{"stop", "--checkpoint", id},
	} {
		r := h.sbx(t, "", args...)
		if r.code == 0 || !strings.Contains(r.stderr, "private user namespace") || !strings.Contains(r.stderr, "--userns host") {
			t.Errorf("sbx %s: exit %d, stderr %q; want a refusal that says to use --userns host", strings.Join(args, " "), r.code, r.stderr)
		}
		if sb := h.inspect(t, id); sb.Status != sbx.StatusRunning || sb.Checkpoint != "" {
			t.Fatalf("after the refused %s: %s, checkpoint %q", args[0], sb.Status, sb.Checkpoint)
		}
	}
	if out := h.must(t, "exec", id, "--", "cat", "/root/f"); out != "kept\n" {
		t.Errorf("after the refusals the sandbox's file reads %q", out)
	}
	assertNoSnapshots(t, h.root)
	r := h.sbx(t, "", "create", "--rootfs", fixture.BusyboxRootfs(t), "--idle-timeout", "1m")
	if r.code == 0 || !strings.Contains(r.stderr, "--userns host") {
		t.Errorf("create --idle-timeout in a private user namespace: exit %d, stderr %q", r.code, r.stderr)
		if r.code == 0 {
			h.saw(strings.TrimSpace(r.stdout))
		}
	}
	if out := strings.Fields(h.must(t, "ls", "-a", "-q")); len(out) != 1 {
		t.Errorf("after the refusals: sandboxes %v, want only %s", out, id)
	}
	h.must(t, "rm", "-f", id)
}
