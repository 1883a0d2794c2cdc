package lifecycle

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// Without --disk the writable layer is capped at --memory: its tmpfs
// pages count toward the memory limit anyway. Writing twice the limit
// fails (ENOSPC or an OOM kill) and the sandbox keeps answering.
func TestLifecycleDiskDefaultsToMemory(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--memory", "64m")
	if got := h.Inspect(t, id).Options.Limits.DiskBytes; got != 64<<20 {
		t.Fatalf("disk cap without --disk under --memory 64m: %d, want %d", got, 64<<20)
	}
	if out := h.Must(t, "exec", id, "--", "sh", "-c", "df -k / | tail -1"); !strings.Contains(out, " 65536 ") {
		t.Fatalf("df of / under --memory 64m: %q, want a 65536 KiB file system", out)
	}
	r := h.Sbx(t, "", "exec", id, "--", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=128")
	if r.Code == 0 {
		t.Fatalf("writing 128 MiB under --memory 64m succeeded: %s", r.Stderr)
	}
	t.Logf("writing 128 MiB: exit %d %q", r.Code, r.Stderr)
	if r.Code != 137 && !strings.Contains(r.Stderr, "No space left") {
		t.Fatalf("writing 128 MiB: exit %d %q; want ENOSPC or an OOM kill (137)", r.Code, r.Stderr)
	}
	h.Must(t, "exec", id, "--", "rm", "-f", "/big")
	if out := h.Must(t, "exec", id, "--", "echo", "alive"); out != "alive\n" {
		t.Fatalf("after the failed write: %q", out)
	}
	h.Must(t, "rm", "-f", id)
}
