package images

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

func TestImagesCommitLayer(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "commit/base:1", fixture.BusyboxImage(t))
	s := imagesStore(t, imagecache.Options{})
	ctx := context.Background()
	base, err := s.Pull(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	layer := fixture.TarBytes(t, []fixture.Entry{
		{Name: "app/", Type: tar.TypeDir},
		{Name: "app/hello", Data: []byte("committed"), Mode: 0o755},
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/.wh.group"},
	})
	img, err := s.Commit(ctx, base, "committed:1", bytes.NewReader(layer), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.LayerDirs) != 2 || img.LayerDirs[0] != base.LayerDirs[0] || img.Config.Cmd[0] != "sh" {
		t.Fatalf("committed image %+v", img)
	}
	got, err := s.Resolve("committed:1")
	if err != nil || got.Digest != img.Digest {
		t.Fatalf("resolve committed: %v %v", got, err)
	}
	m := imagesMount(t, img)
	if data := imagesReadFile(t, filepath.Join(m, "app/hello")); data != "committed" {
		t.Errorf("app/hello = %q", data)
	}
	if _, err := os.Lstat(filepath.Join(m, "etc/group")); !os.IsNotExist(err) {
		t.Errorf("etc/group not whited out: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(m, "etc/passwd")); err != nil {
		t.Errorf("etc/passwd: %v", err)
	}
	cfg := imagecache.ImageConfig{Cmd: []string{"/app/hello"}}
	img2, err := s.Commit(ctx, base, "committed:2", bytes.NewReader(layer), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if img2.LayerDirs[1] != img.LayerDirs[1] || img2.Config.Cmd[0] != "/app/hello" {
		t.Errorf("second commit of the same layer: %+v", img2)
	}
}

// TestImagesRepeatedLayer pulls an image that repeats a layer which needs
// its lowers, with few unpack slots: the repeat must not deadlock.
func TestImagesRepeatedLayer(t *testing.T) {
	reg := fixture.StartRegistry(t)
	base := fixture.LayerFromEntries(t, []fixture.Entry{{Name: "shared/", Type: tar.TypeDir, Mode: 0o711}})
	rep := fixture.LayerFromEntries(t, []fixture.Entry{{Name: "shared/x", Data: []byte("x")}})
	mid := fixture.LayerFromEntries(t, []fixture.Entry{{Name: "shared/", Type: tar.TypeDir, Mode: 0o750}, {Name: "shared/.wh.x"}})
	ref := reg.Push(t, "repeat:1", fixture.NewImage(t, v1.Config{}, base, rep, mid, rep))
	for _, conc := range []int{1, 2, 4} {
		s := imagesStore(t, imagecache.Options{Concurrency: conc})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		img, err := s.Pull(ctx, ref, nil)
		cancel()
		if err != nil {
			t.Fatalf("concurrency %d: %v", conc, err)
		}
		m := imagesMount(t, img)
		if data := imagesReadFile(t, filepath.Join(m, "shared/x")); data != "x" {
			t.Errorf("shared/x = %q", data)
		}
		// Each copy took the directory mode of the layers below it.
		if st := imagesStat(t, filepath.Join(img.LayerDirs[1], "shared")); st.Mode&0o777 != 0o711 {
			t.Errorf("layer 1 shared mode %o", st.Mode&0o777)
		}
		if st := imagesStat(t, filepath.Join(img.LayerDirs[3], "shared")); st.Mode&0o777 != 0o750 {
			t.Errorf("layer 3 shared mode %o", st.Mode&0o777)
		}
	}
}
