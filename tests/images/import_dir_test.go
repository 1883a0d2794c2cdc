package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// An import of a directory that is not an OCI image layout (a plain root
// file system) is refused alike by the local library, the remote client
// and the CLI against either: sbx.ErrInvalid with the same message saying
// to tar it, the same exit code, and no image added on either side.
func TestImportPlainDirectoryRefusedAlike(t *testing.T) {
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	plain := filepath.Join(e.Dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(plain, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "etc", "hostname"), []byte("plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{plain, filepath.Join(e.Dir, "missing")} {
		o := sbx.ImportOptions{Path: path, Name: "plain/dir:1"}
		_, localErr := e.Host.ImportImage(ctx, o)
		_, remoteErr := e.C.ImportImage(ctx, o)
		if !errors.Is(localErr, sbx.ErrInvalid) || !errors.Is(remoteErr, sbx.ErrInvalid) {
			t.Fatalf("import %s: local %v, remote %v; want sbx.ErrInvalid from both", path, localErr, remoteErr)
		}
		// (A missing path is worded by the host's path policy.)
		if path == plain && localErr.Error() != remoteErr.Error() {
			t.Errorf("import %s: local and remote differ:\nlocal  %v\nremote %v", path, localErr, remoteErr)
		}
	}
	_, err := e.Host.ImportImage(ctx, sbx.ImportOptions{Path: plain, Name: "plain/dir:1"})
	if !strings.Contains(err.Error(), "not an OCI image layout") || !strings.Contains(err.Error(), "tar it first") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}

	// The CLI, on local state and against the server: one exit code, one
	// message.
	local := harness.RunSbx(t, "", "--root", e.Root, "--run-root", e.RunRoot, "import", plain, "plain/dir:1")
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	remote := harness.RunSbx(t, "", "--host", e.URL, "import", plain, "plain/dir:1")
	if local.Code == 0 || local.Code != remote.Code || local.Stderr != remote.Stderr {
		t.Errorf("sbx import of a plain directory: local exit %d %q, remote exit %d %q; want one failure", local.Code, local.Stderr, remote.Code, remote.Stderr)
	}
	if imgs, err := e.Host.ListImages(ctx); err != nil || len(imgs) != 0 {
		t.Errorf("images after the refused imports: %v, %v", imgs, err)
	}
}
