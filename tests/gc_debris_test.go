package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sbx gc removes what killed commands leave: an import's staging
// directory under images/tmp and an uploaded archive in images/; a killed
// sbx export -o F leaves no .F.<n> beside F.
func TestGCRemovesDebrisOfKilledCommands(t *testing.T) {
	h := newLCHost(t)
	h.env = []string{"SBX_PULL=never"}
	id := strings.TrimSpace(h.must(t, "create", h.importBusybox(t, "debris/base:1")))
	h.saw(id)

	// What a killed import leaves (its process died holding nothing).
	staging := filepath.Join(h.root, "images", "tmp", "import-123456")
	if err := os.MkdirAll(filepath.Join(staging, "blobs", "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "blobs", "sha256", "x"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	upload := filepath.Join(h.root, "images", ".upload-123456")
	if err := os.WriteFile(upload, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	// A killed export -o.
	dir := t.TempDir()
	r := h.sbxEnv(t, []string{"SBX_TEST_CRASH_AT=export-paused"}, "", "export", "-o", filepath.Join(dir, "F.tar"), id)
	if r.code != -1 {
		t.Errorf("sbx export with SBX_TEST_CRASH_AT=export-paused: exit %d, want killed\n%s", r.code, r.stderr)
	}

	h.must(t, "gc")
	for _, p := range []string{staging, upload} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("sbx gc left %s (%v)", p, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("a killed sbx export -o left %s", left[0].Name())
	}
	// gc left the sandbox and its image alone.
	h.usable(t, id, "gc")
}
