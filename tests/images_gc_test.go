package tests

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

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
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
