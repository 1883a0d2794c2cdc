package security

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestImagesOwnSbxDirIsHidden: an image's own /.sbx directory, whose
// entries would decide where in the root sbx's executor and init are
// bound (a symlink at /.sbx/executor to the image's busybox), is hidden:
// the sandbox's /.sbx holds only sbx's own entry, and the image's busybox
// is its own, for a sandbox (executor) and a one-shot run (init).
func TestImagesOwnSbxDirIsHidden(t *testing.T) {
	h := harness.NewHost(t)
	// A private user namespace's root must be able to reach its root.
	if err := os.Chmod(filepath.Dir(h.Run), 0o711); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(harness.ReachableTempDir(t), "root")
	fixture.NewBusyboxRootfs(t, root)
	if err := os.Mkdir(filepath.Join(root, ".sbx"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"executor", "init"} {
		if err := os.Symlink("/bin/busybox", filepath.Join(root, ".sbx", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".sbx", "junk"), []byte("the image's"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(h.Must(t, "create", "--rootfs", root))
	h.Saw(id)
	defer h.Must(t, "rm", "-f", id)
	if got := strings.Fields(h.Must(t, "exec", id, "--", "ls", "-a", "/.sbx")); strings.Join(got, " ") != ". .. executor" {
		t.Errorf("the sandbox's /.sbx: %q, want only sbx's executor", got)
	}
	if got := h.Must(t, "exec", id, "--", "sh", "-c", "echo busybox $((6*7))"); strings.TrimSpace(got) != "busybox 42" {
		t.Errorf("the image's busybox in the sandbox: %q", got)
	}
	if got := strings.Fields(h.Must(t, "run", "--rootfs", root, "--", "ls", "-a", "/.sbx")); strings.Join(got, " ") != ". .. init" {
		t.Errorf("a one-shot run's /.sbx: %q, want only sbx's init", got)
	}
}
