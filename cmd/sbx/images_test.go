package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/tests/fixture"
)

// runSbx runs the CLI in-process and returns exit code, stdout and stderr.
func runSbx(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := executeTo(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestImagesCLI(t *testing.T) {
	roottest.Require(t, "ownership and whiteouts in layers")
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "cli/busybox:1", fixture.BusyboxImage(t))
	root := t.TempDir()
	r := "--root=" + root

	code, out, errs := runSbx(t, r, "pull", "--quiet", ref)
	if code != 0 || !strings.Contains(out, "cli/busybox:1 sha256:") {
		t.Fatalf("pull: %d %q %q", code, out, errs)
	}
	code, out, _ = runSbx(t, r, "pull", ref) // cached layers, plain progress lines
	if code != 0 || !strings.Contains(out, "sha256:") {
		t.Fatalf("second pull: %d %q", code, out)
	}
	code, out, _ = runSbx(t, r, "images", "--format=json")
	var list []render.ImageSummary
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Layers != 1 || list[0].SizeBytes == 0 {
		t.Fatalf("images --format json: %d %q", code, out)
	}
	code, out, _ = runSbx(t, r, "images", "--format=table", "--quiet=false")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "cli/busybox:1") {
		t.Fatalf("images: %d %q", code, out)
	}
	code, out, _ = runSbx(t, r, "image", "inspect", ref)
	var img sbx.Image
	if code != 0 || json.Unmarshal([]byte(out), &img) != nil || img.Config.Cmd[0] != "sh" || len(img.LayerDirs) != 1 {
		t.Fatalf("image inspect: %d %q", code, out)
	}

	// Import the busybox layer as a root filesystem tarball under a new name.
	tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
	f, _ := os.Create(tarPath)
	if err := fixture.TarDir(f, fixture.BusyboxRootfs(t)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errs = runSbx(t, r, "import", "--quiet", tarPath, "mybox:dev")
	if code != 0 || !strings.Contains(out, "mybox:dev") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	// Progress of a root filesystem names the layer by its diffID, known
	// once it is read, not by a placeholder.
	code, _, errs = runSbx(t, r, "import", "--quiet=false", tarPath, "mybox:dev")
	if code != 0 || !regexp.MustCompile(`layer 1/1 [0-9a-f]{12}: (done|cached)`).MatchString(errs) || strings.Contains(errs, "layer1") {
		t.Fatalf("import progress: %d %q", code, errs)
	}
	if code, _, errs = runSbx(t, r, "import", "--quiet", tarPath); code == 0 || !strings.Contains(errs, "needs a NAME") {
		t.Fatalf("import of a rootfs without a name: %d %q", code, errs)
	}

	if code, _, errs = runSbx(t, r, "image", "inspect", "nope:1"); code != sbx.ExitSbxFailed || !strings.Contains(errs, `image "nope:1" is not in the cache: sbx pull nope:1 or sbx import it`) {
		t.Fatalf("inspect of an unknown image: %d %q", code, errs)
	}
	code, out, _ = runSbx(t, r, "rmi", ref)
	if code != 0 || !strings.Contains(out, "Untagged:") {
		t.Fatalf("rmi: %d %q", code, out)
	}
	// The imported image shares the layer (same diffID): gc keeps it.
	code, out, _ = runSbx(t, r, "image", "gc")
	if code != 0 || !strings.Contains(out, "removed 0 layers") {
		t.Fatalf("gc with a shared layer: %d %q", code, out)
	}
	if code, _, _ = runSbx(t, r, "image", "rm", "mybox:dev"); code != 0 {
		t.Fatal("image rm failed")
	}
	code, out, _ = runSbx(t, r, "image", "gc")
	if code != 0 || !strings.Contains(out, "removed 1 layers") {
		t.Fatalf("gc: %d %q", code, out)
	}
	if code, _, errs = runSbx(t, r, "images", "--format=yaml"); code != sbx.ExitSbxFailed || !strings.Contains(errs, "invalid --format") {
		t.Fatalf("bad format: %d %q", code, errs)
	}
}
