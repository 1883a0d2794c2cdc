package snapshots

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// A sandbox created without --userns runs in a private user namespace,
// which checkpoints do not support: checkpoint, fork, stop --checkpoint
// and create --idle-timeout fail at once saying to use --userns host, the
// sandbox runs on untouched and no snapshot is left.
func TestSnapshotRefusesPrivateUserNS(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	if sb := h.Inspect(t, id); sb.Options.UserNS != sbx.UserNSPrivate {
		t.Fatalf("a sandbox created without --userns has userns %q, want %q", sb.Options.UserNS, sbx.UserNSPrivate)
	}
	h.Must(t, "exec", id, "--", "sh", "-c", "echo kept > /root/f")
	for _, args := range [][]string{
		{"checkpoint", id, "p1"},
		{"checkpoint", "--leave-running", id, "p2"},
		{"fork", id, "-n", "2"},
		{"stop", "--checkpoint", id},
	} {
		r := h.Sbx(t, "", args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "private user namespace") || !strings.Contains(r.Stderr, "--userns host") {
			t.Errorf("sbx %s: exit %d, stderr %q; want a refusal that says to use --userns host", strings.Join(args, " "), r.Code, r.Stderr)
		}
		if sb := h.Inspect(t, id); sb.Status != sbx.StatusRunning || sb.Checkpoint != "" {
			t.Fatalf("after the refused %s: %s, checkpoint %q", args[0], sb.Status, sb.Checkpoint)
		}
	}
	if out := h.Must(t, "exec", id, "--", "cat", "/root/f"); out != "kept\n" {
		t.Errorf("after the refusals the sandbox's file reads %q", out)
	}
	assertNoSnapshots(t, h.Root)
	r := h.Sbx(t, "", "create", "--rootfs", fixture.BusyboxRootfs(t), "--idle-timeout", "1m")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--userns host") {
		t.Errorf("create --idle-timeout in a private user namespace: exit %d, stderr %q", r.Code, r.Stderr)
		if r.Code == 0 {
			h.Saw(strings.TrimSpace(r.Stdout))
		}
	}
	if out := strings.Fields(h.Must(t, "ls", "-a", "-q")); len(out) != 1 {
		t.Errorf("after the refusals: sandboxes %v, want only %s", out, id)
	}
	h.Must(t, "rm", "-f", id)
}
