package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// gc finds overlays of layers under a root whose path has a space, a comma
// and a colon (escaped in mountinfo), and waits for holders of the store.
func TestImagesGCEscapedRootAndHold(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "escaped:1", fixture.NewImage(t, v1.Config{}, imagesSmallLayer(t, "escaped")))
	ctx := context.Background()
	s, err := imagecache.Open(filepath.Join(t.TempDir(), "my images, v1:x"), imagecache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	esc := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	opts := "lowerdir=" + esc.Replace(img.LayerDirs[0]) + ":" + esc.Replace(t.TempDir())
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Fatalf("mount overlay with escaped lowerdir %q: %v", opts, err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
	if _, err := s.Remove(ctx, ref); err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx, nil)
	if err != nil || len(res.RemovedLayers) != 0 || len(res.KeptInUse) != 1 {
		t.Fatalf("gc with the layer mounted under an escaped path: removed %v kept %v (%v)", res.RemovedLayers, res.KeptInUse, err)
	}
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false

	// A holder (sbx run or create between resolving and mounting) makes
	// gc wait.
	release, err := s.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.GC(short, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("gc while the store is held: %v, want it to wait", err)
	}
	if _, err := os.Stat(img.LayerDirs[0]); err != nil {
		t.Fatalf("gc removed a layer while the store was held: %v", err)
	}
	release()
	res, err = s.GC(ctx, nil)
	if err != nil || len(res.RemovedLayers) != 1 {
		t.Fatalf("gc after release: removed %v (%v)", res.RemovedLayers, err)
	}
}

// Image gc keeps the layers of a running one-shot run of an image whose
// name was removed meanwhile (mounts name no layer paths: the run records
// its layers), and of a sandbox whose record is unreadable (gc removes
// nothing then, and says why).
func TestImagesGCKeepsLayersOfRunsAndUnreadableSandboxes(t *testing.T) {
	h := harness.NewHost(t)
	store, err := imagecache.Open(filepath.Join(h.Root, "images"), imagecache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := bench.ImportRoot(context.Background(), store, fixture.BusyboxRootfs(t), "gc/run:1")
	if err != nil {
		t.Fatal(err)
	}
	run := h.Command("run", "--pull", "never", "gc/run:1", "sleep", "109")
	run.Env = os.Environ()
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill(); _ = run.Wait(); h.Sbx(t, "", "gc") }()
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 109") == 1 })
	h.Must(t, "rmi", "gc/run:1")
	if out := h.Must(t, "image", "gc"); !strings.Contains(out, "removed 0 layers") {
		t.Fatalf("gc beside a running one-shot run of the image: %q", out)
	}
	if _, err := os.Stat(img.LayerDirs[0]); err != nil {
		t.Fatalf("the layer of a running run was removed: %v", err)
	}
	_ = run.Process.Kill()
	_ = run.Wait()
	h.Sbx(t, "", "gc")

	// A sandbox of the image whose record is then damaged.
	if _, err := bench.ImportRoot(context.Background(), store, fixture.BusyboxRootfs(t), "gc/run:1"); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(h.Must(t, "create", "--pull", "never", "gc/run:1"))
	h.Saw(id)
	h.Must(t, "rmi", "gc/run:1")
	if err := os.WriteFile(filepath.Join(h.Root, "sandboxes", id, "record.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h.Sbx(t, "", "image", "gc"); r.Code == 0 || !strings.Contains(r.Stderr, "unreadable") {
		t.Fatalf("image gc with an unreadable record: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(img.LayerDirs[0]); err != nil {
		t.Fatalf("the layer of a sandbox with an unreadable record was removed: %v", err)
	}
	h.Must(t, "rm", "-f", id)
	if out := h.Must(t, "image", "gc"); !strings.Contains(out, "removed 1 layers") {
		t.Fatalf("gc after rm: %q", out)
	}
}
