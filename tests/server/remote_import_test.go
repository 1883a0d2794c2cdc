package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerRemoteImport runs `sbx import --host` against `sbx serve`: an
// OCI layout directory (tarred on the fly), a docker save tar and a root
// filesystem tarball land in the server's cache (not the local one) and
// run there; a bad archive and one over --max-upload-size are refused and
// leave nothing behind.
func TestServerRemoteImport(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Extra = []string{"--max-upload-size", "16m"}
	p.Start(t)
	defer p.Stop(t)
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	local := t.TempDir()
	sbx := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.Sock}, args...)...)
	}
	work := t.TempDir()
	img := fixture.BusyboxImage(t)

	// An OCI layout directory, named by the command line.
	layoutDir := filepath.Join(work, "layout")
	harness.ImagesWriteLayout(t, layoutDir, "ignored:1", img)
	if r := sbx("import", layoutDir, "remote/layout:1"); r.Code != 0 || !strings.Contains(r.Stdout, "remote/layout:1 sha256:") {
		t.Fatalf("remote import of a layout directory: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	// A docker save tar that names its image.
	saved := filepath.Join(work, "saved.tar")
	tag, _ := name.NewTag("example.com/remote/saved:1")
	if err := tarball.WriteToFile(saved, tag, img); err != nil {
		t.Fatal(err)
	}
	if r := sbx("image", "import", saved); r.Code != 0 || !strings.Contains(r.Stdout, "example.com/remote/saved:1 sha256:") {
		t.Fatalf("remote import of a docker save tar: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	// A root filesystem tarball, which needs a name.
	rootTar := filepath.Join(work, "rootfs.tar")
	harness.ImagesTarFile(t, fixture.CacheDir+"/busybox", rootTar)
	if r := sbx("import", rootTar); r.Code == 0 {
		t.Fatalf("remote import of a rootfs tarball without a name succeeded: %q", r.Stdout)
	}
	if r := sbx("import", rootTar, "remote/rootfs:1"); r.Code != 0 || !strings.Contains(r.Stdout, "remote/rootfs:1 sha256:") {
		t.Fatalf("remote import of a rootfs tarball: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, ref := range []string{"remote/layout:1", "example.com/remote/saved:1", "remote/rootfs:1"} {
		if r := sbx("run", ref, "ls", "/bin/busybox"); r.Code != 0 || r.Stdout != "/bin/busybox\n" {
			t.Fatalf("run of the imported %s: %d %q %s", ref, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := harness.RunSbx(t, "", "--root", local+"/root", "--run-root", local+"/run", "images", "-q"); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("the remote import landed in the local cache: %q %s", r.Stdout, r.Stderr)
	}

	// Refusals: not an archive; over the upload limit; a missing file.
	junk := filepath.Join(work, "junk.tar")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a tar ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := sbx("import", junk, "remote/junk:1"); r.Code == 0 || !strings.Contains(r.Stderr, "import") {
		t.Fatalf("remote import of junk: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	big := filepath.Join(work, "big.tar")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(17 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r := sbx("import", big, "remote/big:1"); r.Code == 0 || !strings.Contains(r.Stderr, "upload limit") {
		t.Fatalf("remote import over --max-upload-size: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := sbx("import", filepath.Join(work, "nosuch.tar"), "x"); r.Code == 0 {
		t.Fatal("remote import of a missing file succeeded")
	}
	r := sbx("images", "--format", "json")
	if r.Code != 0 || strings.Contains(r.Stdout, "junk") || strings.Contains(r.Stdout, "big") {
		t.Fatalf("images after the refused imports: %d %s", r.Code, r.Stdout)
	}
	if left, _ := filepath.Glob(filepath.Join(p.Root, "images", ".upload-*")); len(left) != 0 {
		t.Fatalf("uploads left in the cache: %v", left)
	}
}
