package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sbx gc removes what killed commands leave: an import's staging
// directory under images/tmp and an uploaded archive in images/; a killed
// sbx export -o F leaves no .F.<n> beside F.
func TestGCRemovesDebrisOfKilledCommands(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	id := strings.TrimSpace(h.Must(t, "create", h.ImportBusybox(t, "debris/base:1")))
	h.Saw(id)

	// What a killed import leaves (its process died holding nothing).
	staging := filepath.Join(h.Root, "images", "tmp", "import-123456")
	if err := os.MkdirAll(filepath.Join(staging, "blobs", "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "blobs", "sha256", "x"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	upload := filepath.Join(h.Root, "images", ".upload-123456")
	if err := os.WriteFile(upload, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	// A killed export -o.
	dir := t.TempDir()
	r := h.SbxEnv(t, []string{"SBX_TEST_CRASH_AT=export-paused"}, "", "export", "-o", filepath.Join(dir, "F.tar"), id)
	if r.Code != -1 {
		t.Errorf("sbx export with SBX_TEST_CRASH_AT=export-paused: exit %d, want killed\n%s", r.Code, r.Stderr)
	}

	h.Must(t, "gc")
	for _, p := range []string{staging, upload} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("sbx gc left %s (%v)", p, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("a killed sbx export -o left %s", left[0].Name())
	}
	// gc left the sandbox and its image alone.
	usable(h, t, id, "gc")
}
