package images

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

func imagesRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// imagesCheckMulti checks the merged view of the multi-layer test image.
func imagesCheckMulti(t *testing.T, img *imagecache.Image) {
	t.Helper()
	if len(img.LayerDirs) != 3 || img.Config.WorkingDir != "/data" {
		t.Fatalf("imported image %+v", img)
	}
	m := imagesMount(t, img)
	if got := imagesReadFile(t, filepath.Join(m, "hl/c")); got != "hello" {
		t.Errorf("hl/c = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(m, "etc/gone")); !os.IsNotExist(err) {
		t.Errorf("whiteout lost: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(m, "data/opq")); len(entries) != 1 {
		t.Errorf("opaque dir lists %v", entries)
	}
}

func TestImagesImportFormats(t *testing.T) {
	ctx := context.Background()
	multi := imagesMultiLayer(t)
	tmp := t.TempDir()
	ociDir := filepath.Join(tmp, "oci")
	harness.ImagesWriteLayout(t, ociDir, "example.com/multi:v1", multi)
	wantDigest, _ := multi.Digest()

	t.Run("oci layout", func(t *testing.T) {
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, ociDir, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if img.Name != "example.com/multi:v1" || img.Digest != wantDigest.String() {
			t.Errorf("name %s digest %s", img.Name, img.Digest)
		}
		imagesCheckMulti(t, img)
	})
	t.Run("oci archive", func(t *testing.T) {
		archive := filepath.Join(tmp, "oci.tar")
		harness.ImagesTarFile(t, ociDir, archive)
		if f, _ := imagecache.DetectFormat(archive); f != imagecache.FormatOCIArchive {
			t.Errorf("detected %s", f)
		}
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, archive, "renamed:2", nil)
		if err != nil {
			t.Fatal(err)
		}
		if imagecache.FamiliarName(img.Name) != "renamed:2" {
			t.Errorf("name %s", img.Name)
		}
		imagesCheckMulti(t, img)
		if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
			t.Errorf("extracted archive left in tmp: %v", entries)
		}
	})
	t.Run("docker save", func(t *testing.T) {
		archive := filepath.Join(tmp, "docker.tar")
		tag, _ := name.NewTag("example.com/multi:saved")
		if err := tarball.WriteToFile(archive, tag, multi); err != nil {
			t.Fatal(err)
		}
		if f, _ := imagecache.DetectFormat(archive); f != imagecache.FormatDockerSave {
			t.Errorf("detected %s", f)
		}
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, archive, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		cfgName, _ := multi.ConfigName()
		if img.Name != "example.com/multi:saved" || img.Digest != cfgName.String() {
			t.Errorf("name %s digest %s", img.Name, img.Digest)
		}
		imagesCheckMulti(t, img)
	})
	t.Run("docker save with two images needs a name", func(t *testing.T) {
		archive := filepath.Join(tmp, "two.tar")
		t1, _ := name.NewTag("example.com/one:1")
		t2, _ := name.NewTag("example.com/two:1")
		two := fixture.NewImage(t, v1.Config{Cmd: []string{"two"}}, imagesSmallLayer(t, "two"))
		if err := tarball.MultiWriteToFile(archive, map[name.Tag]v1.Image{t1: multi, t2: two}); err != nil {
			t.Fatal(err)
		}
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Import(ctx, archive, "", nil); err == nil || !strings.Contains(err.Error(), "give the NAME") {
			t.Fatalf("got %v", err)
		}
		img, err := s.Import(ctx, archive, "example.com/two:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if img.Config.Cmd[0] != "two" {
			t.Errorf("picked %+v", img.Config)
		}
	})
	rootfsTar := fixture.TarBytes(t, []fixture.Entry{
		{Name: "bin/", Type: '5'}, {Name: "bin/hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")},
	})
	for _, c := range []struct {
		name string
		data func() []byte
	}{
		{"rootfs tar", func() []byte { return rootfsTar }},
		{"rootfs tar.gz", func() []byte {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(rootfsTar)
			w.Close()
			return b.Bytes()
		}},
		{"rootfs tar.zst", func() []byte {
			var b bytes.Buffer
			w, _ := zstd.NewWriter(&b)
			w.Write(rootfsTar)
			w.Close()
			return b.Bytes()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "rootfs")
			if err := os.WriteFile(p, c.data(), 0o644); err != nil {
				t.Fatal(err)
			}
			if f, _ := imagecache.DetectFormat(p); f != imagecache.FormatRootfs {
				t.Errorf("detected %s", f)
			}
			s := imagesStore(t, imagecache.Options{})
			if _, err := s.Import(ctx, p, "", nil); err == nil {
				t.Error("a rootfs without a name was imported")
			}
			img, err := s.Import(ctx, p, "local/hello", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := imagesReadFile(t, filepath.Join(img.LayerDirs[0], "bin/hello")); !strings.Contains(got, "echo hi") {
				t.Errorf("bin/hello = %q", got)
			}
			// Importing it again reuses the layer.
			again, err := s.Import(ctx, p, "local/hello:2", nil)
			if err != nil || again.LayerDirs[0] != img.LayerDirs[0] {
				t.Errorf("second import: %v %v", again, err)
			}
		})
	}
	t.Run("not an archive", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "junk")
		os.WriteFile(p, []byte("this is not a tar file at all, not even close........"), 0o644)
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Import(ctx, p, "x", nil); err == nil || !strings.Contains(err.Error(), "not a tar archive") {
			t.Errorf("got %v", err)
		}
		imagesAssertClean(t, s)
	})
}

// TestImagesImportSkopeoUmoci imports archives written by skopeo and umoci.
func TestImagesImportSkopeoUmoci(t *testing.T) {
	for _, tool := range []string{"skopeo", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (make deps-bench): %v", tool, err)
		}
	}
	ctx := context.Background()
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "tools/multi:v1", imagesMultiLayer(t))
	tmp := t.TempDir()
	ociDir := filepath.Join(tmp, "skopeo-oci")
	imagesRun(t, "skopeo", "copy", "--quiet", "--src-tls-verify=false", "docker://"+ref, "oci:"+ociDir+":v1")

	t.Run("skopeo oci layout", func(t *testing.T) {
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Import(ctx, ociDir, "", nil); err == nil || !strings.Contains(err.Error(), "give a NAME") {
			t.Errorf("a layout naming only a tag: %v", err)
		}
		img, err := s.Import(ctx, ociDir, "tools/multi:v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		imagesCheckMulti(t, img)
	})
	t.Run("skopeo oci-archive", func(t *testing.T) {
		archive := filepath.Join(tmp, "skopeo-oci.tar")
		imagesRun(t, "skopeo", "copy", "--quiet", "oci:"+ociDir+":v1", "oci-archive:"+archive+":v1")
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, archive, "tools/multi:archive", nil)
		if err != nil {
			t.Fatal(err)
		}
		imagesCheckMulti(t, img)
	})
	t.Run("skopeo docker-archive", func(t *testing.T) {
		archive := filepath.Join(tmp, "skopeo-docker.tar")
		imagesRun(t, "skopeo", "copy", "--quiet", "oci:"+ociDir+":v1", "docker-archive:"+archive+":example.com/tools/multi:docker")
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, archive, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if img.Name != "example.com/tools/multi:docker" {
			t.Errorf("name %s", img.Name)
		}
		imagesCheckMulti(t, img)
	})
	t.Run("umoci layout", func(t *testing.T) {
		dir := filepath.Join(tmp, "umoci")
		imagesRun(t, "umoci", "init", "--layout", dir)
		imagesRun(t, "umoci", "new", "--image", dir+":base")
		src := filepath.Join(tmp, "umoci-src")
		os.MkdirAll(filepath.Join(src, "app"), 0o755)
		os.WriteFile(filepath.Join(src, "app", "hello"), []byte("from umoci"), 0o644)
		imagesRun(t, "umoci", "insert", "--image", dir+":base", "--tag", "withapp", src+"/app", "/app")
		imagesRun(t, "umoci", "config", "--image", dir+":withapp", "--config.cmd", "/app/hello", "--config.workingdir", "/app")
		s := imagesStore(t, imagecache.Options{})
		img, err := s.Import(ctx, dir, "umoci/app:withapp", nil)
		if err != nil {
			t.Fatal(err)
		}
		if img.Config.WorkingDir != "/app" || len(img.Config.Cmd) != 1 {
			t.Errorf("config %+v", img.Config)
		}
		m := imagesMount(t, img)
		if got := imagesReadFile(t, filepath.Join(m, "app/hello")); got != "from umoci" {
			t.Errorf("app/hello = %q", got)
		}
	})
}
