package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDiskBackedWritableLayer: --disk-backing disk puts the writable layer
// in the sandbox's state directory, so a job writes more than --memory
// (where the default tmpfs, capped at --memory, says ENOSPC); commit and
// restart keep working on it, and rm and gc leave nothing of it.
func TestDiskBackedWritableLayer(t *testing.T) {
	h := harness.NewHost(t)
	// The default: the layer is memory, capped at --memory.
	mem := h.Create(t, "--memory", "32m")
	if r := h.Sbx(t, "", "exec", mem, "--", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=48"); r.Code == 0 {
		t.Fatal("a memory-backed layer of a 32m sandbox took 48 MiB")
	}
	h.Must(t, "rm", "-f", mem)

	id := h.Create(t, "--memory", "32m", "--disk-backing", "disk")
	h.Must(t, "exec", id, "--", "dd", "if=/dev/zero", "of=/big", "bs=1M", "count=48")
	layer := filepath.Join(h.Root, "sandboxes", id, "rw", "upper", "big")
	if fi, err := os.Stat(layer); err != nil || fi.Size() != 48<<20 {
		t.Fatalf("the file on disk: %v %v", fi, err)
	}
	if sb := h.Inspect(t, id); sb.Options.DiskBacking != "disk" {
		t.Fatalf("the record's disk backing: %q", sb.Options.DiskBacking)
	}
	h.Must(t, "restart", "-t", "1", id)
	if out := h.Must(t, "exec", id, "--", "stat", "-c", "%s", "/big"); out != "50331648\n" {
		t.Fatalf("after restart: %q", out)
	}
	h.Must(t, "rm", "-f", id)
	if _, err := os.Stat(filepath.Join(h.Root, "sandboxes", id)); !os.IsNotExist(err) {
		t.Fatalf("the layer's directory after rm: %v", err)
	}
	h.AssertNoLeaksOf(t, id)
	if r := h.Sbx(t, "", "create", "--disk-backing", "ssd", "--rootfs", "/"); r.Code == 0 || !strings.Contains(r.Stderr, "disk backing") {
		t.Fatalf("a bad --disk-backing: %d %s", r.Code, r.Stderr)
	}
}
