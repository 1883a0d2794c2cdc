package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// archiveRoot runs sbx against a private image cache (no sandboxes).
type archiveRoot struct{ root, run string }

func newArchiveRoot(t *testing.T) archiveRoot {
	dir := t.TempDir()
	return archiveRoot{root: filepath.Join(dir, "root"), run: filepath.Join(dir, "run")}
}

func (a archiveRoot) sbx(t *testing.T, stdin string, args ...string) harness.Result {
	t.Helper()
	return harness.RunSbx(t, stdin, append([]string{"--root", a.root, "--run-root", a.run}, args...)...)
}

func (a archiveRoot) must(t *testing.T, args ...string) string {
	t.Helper()
	r := a.sbx(t, "", args...)
	if r.Code != 0 {
		t.Fatalf("sbx %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (a archiveRoot) images(t *testing.T) map[string]string {
	t.Helper()
	var imgs []sbx.Image
	if err := json.Unmarshal([]byte(a.must(t, "images", "--format", "json")), &imgs); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, img := range imgs {
		out[sbx.FamiliarName(img.Name)] = img.Digest
	}
	return out
}

// rootfsTar writes a small root file system tarball holding one file.
func rootfsTar(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	data := fixture.TarBytes(t, []fixture.Entry{{Name: "etc/", Type: '5'}, {Name: "etc/what", Data: []byte(content)}})
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sbx save of several images, then sbx load of the archive, loads all of
// them (as docker load does), and no message names a temporary path.
func TestImagesSaveSeveralLoadAll(t *testing.T) {
	src, dst := newArchiveRoot(t), newArchiveRoot(t)
	src.must(t, "import", rootfsTar(t, "a"), "arch/a:1")
	src.must(t, "import", rootfsTar(t, "b"), "arch/b:2")
	archive := filepath.Join(t.TempDir(), "s.tar")
	src.must(t, "save", "-o", archive, "arch/a:1", "arch/b:2")
	r := dst.sbx(t, "", "load", "-q", "-i", archive)
	if r.Code != 0 {
		t.Fatalf("sbx load of two images: exit %d %q", r.Code, r.Stderr)
	}
	got := dst.images(t)
	for _, n := range []string{"arch/a:1", "arch/b:2"} {
		if got[n] == "" {
			t.Errorf("after load: %s is missing (loaded: %v)", n, got)
		}
		if !strings.Contains(r.Stdout, "Loaded image: "+n) {
			t.Errorf("sbx load did not say it loaded %s: %q", n, r.Stdout)
		}
	}
	// A NAME still picks one; a NAME that is not there fails without a
	// temporary path in the message.
	one := newArchiveRoot(t)
	one.must(t, "load", "-q", "-i", archive, "arch/b:2")
	if imgs := one.images(t); len(imgs) != 1 || imgs["arch/b:2"] == "" {
		t.Errorf("sbx load NAME loaded %v", imgs)
	}
	r = one.sbx(t, "", "load", "-q", "-i", archive, "arch/c:3")
	if r.Code == 0 || strings.Contains(r.Stderr, "images/tmp") || strings.Contains(r.Stderr, one.root) {
		t.Errorf("sbx load of a missing NAME: exit %d, message %q (must fail and name no temporary path)", r.Code, r.Stderr)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	r = one.sbx(t, string(data), "load", "-q", "arch/c:3")
	if r.Code == 0 || strings.Contains(r.Stderr, ".upload") || strings.Contains(r.Stderr, one.root) {
		t.Errorf("sbx load < archive of a missing NAME: exit %d, message %q (must fail and name no temporary path)", r.Code, r.Stderr)
	}
}

// An OCI layout whose ref names are short (a bare name, a bare tag) is
// imported under the NAME given.
func TestImagesImportLayoutShortRefName(t *testing.T) {
	img := fixture.NewImage(t, v1.Config{Cmd: []string{"/bin/true"}}, fixture.LayerFromEntries(t, []fixture.Entry{{Name: "f", Data: []byte("x")}}))
	for _, ref := range []string{"bb", "v1"} {
		dir := filepath.Join(t.TempDir(), "layout")
		harness.ImagesWriteLayout(t, dir, ref, img)
		a := newArchiveRoot(t)
		r := a.sbx(t, "", "import", "-q", dir, ref)
		if r.Code != 0 {
			t.Errorf("sbx import LAYOUT %s (ref name %q): exit %d %q", ref, ref, r.Code, r.Stderr)
			continue
		}
		if imgs := a.images(t); imgs[ref+":latest"] == "" && imgs[ref] == "" {
			t.Errorf("sbx import LAYOUT %s: images %v", ref, imgs)
		}
	}
}

// Importing the same root file system tarball twice (from a file, and from
// stdin) gives the same digest.
func TestImagesImportReproducibleDigest(t *testing.T) {
	tarPath := rootfsTar(t, "same")
	a := newArchiveRoot(t)
	a.must(t, "import", "-q", tarPath, "rep/one")
	a.must(t, "import", "-q", tarPath, "rep/two")
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if r := a.sbx(t, string(data), "load", "-q", "rep/three"); r.Code != 0 {
		t.Fatalf("sbx load < rootfs.tar: %d %q", r.Code, r.Stderr)
	}
	imgs := a.images(t)
	one := imgs["rep/one:latest"]
	if one == "" || imgs["rep/two:latest"] != one || imgs["rep/three:latest"] != one {
		t.Fatalf("the same tarball imported three times: %v; want one digest", imgs)
	}
}
