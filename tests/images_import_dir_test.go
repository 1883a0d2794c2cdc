package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

// An import of a directory that is not an OCI image layout (a plain root
// file system) is refused alike by the local library, the remote client
// and the CLI against either: sbx.ErrInvalid with the same message saying
// to tar it, the same exit code, and no image added on either side.
func TestImportPlainDirectoryRefusedAlike(t *testing.T) {
	e := newServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	plain := filepath.Join(e.dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(plain, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "etc", "hostname"), []byte("plain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{plain, filepath.Join(e.dir, "missing")} {
		o := sbx.ImportOptions{Path: path, Name: "plain/dir:1"}
		_, localErr := e.host.ImportImage(ctx, o)
		_, remoteErr := e.c.ImportImage(ctx, o)
		if !errors.Is(localErr, sbx.ErrInvalid) || !errors.Is(remoteErr, sbx.ErrInvalid) {
			t.Fatalf("import %s: local %v, remote %v; want sbx.ErrInvalid from both", path, localErr, remoteErr)
		}
		// (A missing path is worded by the host's path policy.)
		if path == plain && localErr.Error() != remoteErr.Error() {
			t.Errorf("import %s: local and remote differ:\nlocal  %v\nremote %v", path, localErr, remoteErr)
		}
	}
	_, err := e.host.ImportImage(ctx, sbx.ImportOptions{Path: plain, Name: "plain/dir:1"})
	if !strings.Contains(err.Error(), "not an OCI image layout") || !strings.Contains(err.Error(), "tar it first") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}

	// The CLI, on local state and against the server: one exit code, one
	// message.
	local := runSbx(t, "", "--root", e.root, "--run-root", e.runRoot, "import", plain, "plain/dir:1")
	t.Setenv("SBX_TOKEN", serverTestToken)
	remote := runSbx(t, "", "--host", e.url, "import", plain, "plain/dir:1")
	if local.code == 0 || local.code != remote.code || local.stderr != remote.stderr {
		t.Errorf("sbx import of a plain directory: local exit %d %q, remote exit %d %q; want one failure", local.code, local.stderr, remote.code, remote.stderr)
	}
	if imgs, err := e.host.ListImages(ctx); err != nil || len(imgs) != 0 {
		t.Errorf("images after the refused imports: %v, %v", imgs, err)
	}
}
