package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sbx cp ID:relative is relative to the sandbox's working directory, both
// ways; a missing sandbox path exits 1 with "no such file".
func TestLifecycleCpRelativeAndMissing(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t, "-w", "/work")
	h.must(t, "exec", id, "--", "sh", "-c", "echo inside > /work/f")
	dir := t.TempDir()
	h.must(t, "cp", id+":f", filepath.Join(dir, "got"))
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "inside\n" {
		t.Fatalf("cp %s:f: %q, %v", id, b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "up"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.must(t, "cp", filepath.Join(dir, "up"), id+":sub-up")
	if out := h.must(t, "exec", id, "--", "cat", "/work/sub-up"); out != "outside\n" {
		t.Fatalf("cp to %s:sub-up landed elsewhere: %q", id, out)
	}
	r := h.sbx(t, "", "cp", id+":/missing", filepath.Join(dir, "x"))
	if r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("sbx cp %s:/missing: exit %d %q; want 1 and \"no such file\"", id, r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Fatalf("a failed cp left %s: %v", filepath.Join(dir, "x"), err)
	}
	h.must(t, "rm", "-f", id)
}
