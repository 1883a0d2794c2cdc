package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sbxrun/sbx/tests/fixture"
)

// TestServerRemoteImport runs `sbx import --host` against `sbx serve`: an
// OCI layout directory (tarred on the fly), a docker save tar and a root
// filesystem tarball land in the server's cache (not the local one) and
// run there; a bad archive and one over --max-upload-size are refused and
// leave nothing behind.
func TestServerRemoteImport(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := newServeDirs(t)
	p.extra = []string{"--max-upload-size", "16m"}
	p.start(t)
	defer p.stop(t)
	t.Setenv("SBX_TOKEN", serverTestToken)
	local := t.TempDir()
	sbx := func(args ...string) result {
		return runSbx(t, "", append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.sock}, args...)...)
	}
	work := t.TempDir()
	img := fixture.BusyboxImage(t)

	// An OCI layout directory, named by the command line.
	layoutDir := filepath.Join(work, "layout")
	imagesWriteLayout(t, layoutDir, "ignored:1", img)
	if r := sbx("import", layoutDir, "remote/layout:1"); r.code != 0 || !strings.Contains(r.stdout, "remote/layout:1 sha256:") {
		t.Fatalf("remote import of a layout directory: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// A docker save tar that names its image.
	saved := filepath.Join(work, "saved.tar")
	tag, _ := name.NewTag("example.com/remote/saved:1")
	if err := tarball.WriteToFile(saved, tag, img); err != nil {
		t.Fatal(err)
	}
	if r := sbx("image", "import", saved); r.code != 0 || !strings.Contains(r.stdout, "example.com/remote/saved:1 sha256:") {
		t.Fatalf("remote import of a docker save tar: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// A root filesystem tarball, which needs a name.
	rootTar := filepath.Join(work, "rootfs.tar")
	imagesTarFile(t, fixture.CacheDir+"/busybox", rootTar)
	if r := sbx("import", rootTar); r.code == 0 {
		t.Fatalf("remote import of a rootfs tarball without a name succeeded: %q", r.stdout)
	}
	if r := sbx("import", rootTar, "remote/rootfs:1"); r.code != 0 || !strings.Contains(r.stdout, "remote/rootfs:1 sha256:") {
		t.Fatalf("remote import of a rootfs tarball: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, ref := range []string{"remote/layout:1", "example.com/remote/saved:1", "remote/rootfs:1"} {
		if r := sbx("run", ref, "ls", "/bin/busybox"); r.code != 0 || r.stdout != "/bin/busybox\n" {
			t.Fatalf("run of the imported %s: %d %q %s", ref, r.code, r.stdout, r.stderr)
		}
	}
	if r := runSbx(t, "", "--root", local+"/root", "--run-root", local+"/run", "images", "-q"); r.code != 0 || r.stdout != "" {
		t.Fatalf("the remote import landed in the local cache: %q %s", r.stdout, r.stderr)
	}

	// Refusals: not an archive; over the upload limit; a missing file.
	junk := filepath.Join(work, "junk.tar")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a tar ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := sbx("import", junk, "remote/junk:1"); r.code == 0 || !strings.Contains(r.stderr, "import") {
		t.Fatalf("remote import of junk: %d %q %s", r.code, r.stdout, r.stderr)
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
	if r := sbx("import", big, "remote/big:1"); r.code == 0 || !strings.Contains(r.stderr, "upload limit") {
		t.Fatalf("remote import over --max-upload-size: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := sbx("import", filepath.Join(work, "nosuch.tar"), "x"); r.code == 0 {
		t.Fatal("remote import of a missing file succeeded")
	}
	r := sbx("images", "--format", "json")
	if r.code != 0 || strings.Contains(r.stdout, "junk") || strings.Contains(r.stdout, "big") {
		t.Fatalf("images after the refused imports: %d %s", r.code, r.stdout)
	}
	if left, _ := filepath.Glob(filepath.Join(p.root, "images", ".upload-*")); len(left) != 0 {
		t.Fatalf("uploads left in the cache: %v", left)
	}
}
