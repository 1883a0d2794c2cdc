package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sbx cp ID:relative is relative to the sandbox's working directory, both
// ways; a missing sandbox path exits 1 with "no such file".
func TestLifecycleCpRelativeAndMissing(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "-w", "/work")
	h.Must(t, "exec", id, "--", "sh", "-c", "echo inside > /work/f")
	dir := t.TempDir()
	h.Must(t, "cp", id+":f", filepath.Join(dir, "got"))
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "inside\n" {
		t.Fatalf("cp %s:f: %q, %v", id, b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "up"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "cp", filepath.Join(dir, "up"), id+":sub-up")
	if out := h.Must(t, "exec", id, "--", "cat", "/work/sub-up"); out != "outside\n" {
		t.Fatalf("cp to %s:sub-up landed elsewhere: %q", id, out)
	}
	r := h.Sbx(t, "", "cp", id+":/missing", filepath.Join(dir, "x"))
	if r.Code != 1 || !strings.Contains(r.Stderr, "no such file") {
		t.Fatalf("sbx cp %s:/missing: exit %d %q; want 1 and \"no such file\"", id, r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Fatalf("a failed cp left %s: %v", filepath.Join(dir, "x"), err)
	}
	h.Must(t, "rm", "-f", id)
}
