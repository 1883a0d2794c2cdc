package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

// imagesAssertClean checks that a failed pull left nothing behind: no
// image, no layer directory, nothing in tmp.
func imagesAssertClean(t *testing.T, s *imagecache.Store) {
	t.Helper()
	if imgs, err := s.List(); err != nil || len(imgs) != 0 {
		t.Errorf("index after a failed pull: %v %v", imgs, err)
	}
	for _, d := range []string{"layers", "tmp"} {
		entries, _ := os.ReadDir(filepath.Join(s.Root(), d))
		for _, e := range entries {
			t.Errorf("left behind after a failed pull: %s/%s", d, e.Name())
		}
	}
}

func imagesSmallLayer(t *testing.T, content string) v1.Layer {
	return fixture.LayerFromEntries(t, []fixture.Entry{{Name: "f", Data: []byte(content)}})
}

func TestImagesPullErrors(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ctx := context.Background()
	good := fixture.NewImage(t, v1.Config{}, imagesSmallLayer(t, "good"))
	ref := reg.Push(t, "errs:good", good)

	t.Run("unknown tag", func(t *testing.T) {
		s := imagesStore(t, imagecache.Options{})
		_, err := s.Pull(ctx, reg.Host+"/errs:nope", nil)
		if !errors.Is(err, imagecache.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		imagesAssertClean(t, s)
	})
	t.Run("unknown repository", func(t *testing.T) {
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, reg.Host+"/nothing/here:1", nil); !errors.Is(err, imagecache.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("invalid reference", func(t *testing.T) {
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, "UPPER/Case::bad", nil); err == nil || !strings.Contains(err.Error(), "invalid image reference") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, addr+"/x:1", nil); !errors.Is(err, imagecache.ErrUnreachable) {
			t.Fatalf("got %v, want ErrUnreachable", err)
		}
		imagesAssertClean(t, s)
	})
	t.Run("authentication", func(t *testing.T) {
		areg := fixture.StartRegistry(t)
		aref := areg.Push(t, "private:1", good)
		areg.RequireAuth("alice", "s3cret")
		t.Setenv("DOCKER_CONFIG", t.TempDir())
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, aref, nil); !errors.Is(err, imagecache.ErrAuth) {
			t.Fatalf("without credentials: %v, want ErrAuth", err)
		}
		imagesAssertClean(t, s)
		cfg := t.TempDir()
		areg.DockerConfig(t, cfg, "alice", "s3cret")
		t.Setenv("DOCKER_CONFIG", cfg)
		if _, err := s.Pull(ctx, aref, nil); err != nil {
			t.Fatalf("with credentials from config.json: %v", err)
		}
	})
	t.Run("tampered blob", func(t *testing.T) {
		treg := fixture.StartRegistry(t)
		tref := treg.Push(t, "tampered:1", good)
		layers, _ := good.Layers()
		d, _ := layers[0].Digest()
		size, _ := layers[0].Size()
		var evil []byte
		for i := 0; i < 100 && int64(len(evil)) != size; i++ {
			rc, _ := imagesSmallLayer(t, fmt.Sprintf("e%03d", i)).Compressed()
			evil, _ = io.ReadAll(rc)
		}
		if int64(len(evil)) != size {
			t.Fatal("could not make a tampered blob of the same size")
		}
		treg.Tamper(d.String(), evil)
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, tref, nil); !errors.Is(err, imagecache.ErrDigestMismatch) {
			t.Fatalf("got %v, want ErrDigestMismatch", err)
		}
		imagesAssertClean(t, s)
	})
	t.Run("wrong diffID", func(t *testing.T) {
		cf, _ := good.ConfigFile()
		cf = cf.DeepCopy()
		cf.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
		bad, err := mutate.ConfigFile(good, cf)
		if err != nil {
			t.Fatal(err)
		}
		bref := reg.Push(t, "errs:diffid", bad)
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, bref, nil); !errors.Is(err, imagecache.ErrDigestMismatch) {
			t.Fatalf("got %v, want ErrDigestMismatch", err)
		}
		imagesAssertClean(t, s)
	})
	t.Run("unsupported media type", func(t *testing.T) {
		enc, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(fixture.TarBytes(t, []fixture.Entry{{Name: "x"}}))), nil
		}, tarball.WithMediaType("application/vnd.oci.image.layer.v1.tar+gzip+encrypted"))
		if err != nil {
			t.Fatal(err)
		}
		uref := reg.Push(t, "errs:encrypted", fixture.NewImage(t, v1.Config{}, enc))
		s := imagesStore(t, imagecache.Options{})
		if _, err := s.Pull(ctx, uref, nil); !errors.Is(err, imagecache.ErrUnsupported) {
			t.Fatalf("got %v, want ErrUnsupported", err)
		}
		imagesAssertClean(t, s)
	})
	t.Run("disk full", func(t *testing.T) {
		dir := t.TempDir()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
		s, err := imagecache.Open(filepath.Join(dir, "images"), imagecache.Options{})
		if err != nil {
			t.Fatal(err)
		}
		bref := reg.Push(t, "errs:busybox", fixture.BusyboxImage(t))
		_, err = s.Pull(ctx, bref, nil)
		if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("got %v, want ENOSPC", err)
		}
		imagesAssertClean(t, s)
		// The same store works once there is room for the image.
		if _, err := s.Pull(ctx, ref, nil); err != nil {
			t.Fatalf("small pull after disk full: %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		creg := fixture.StartRegistry(t)
		cref := creg.Push(t, "slow:1", good)
		creg.SetBlobDelay(2 * time.Second)
		s := imagesStore(t, imagecache.Options{})
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := s.Pull(cctx, cref, nil); err == nil {
			t.Fatal("a cancelled pull succeeded")
		}
		imagesAssertClean(t, s)
	})
}

// imagesLayered builds an image of n small distinct layers on top of busybox.
func imagesLayered(t *testing.T, n int, tag string) v1.Image {
	layers := []v1.Layer{}
	bl, _ := fixture.BusyboxImage(t).Layers()
	layers = append(layers, bl...)
	for i := 0; i < n; i++ {
		layers = append(layers, fixture.LayerFromEntries(t, []fixture.Entry{
			{Name: fmt.Sprintf("l%d/", i), Type: '5'},
			{Name: fmt.Sprintf("l%d/data", i), Data: bytes.Repeat([]byte(tag), 100_000)},
		}))
	}
	return fixture.NewImage(t, v1.Config{Cmd: []string{"sh"}}, layers...)
}

func imagesBlobDigests(t *testing.T, img v1.Image) []string {
	layers, _ := img.Layers()
	var out []string
	for _, l := range layers {
		d, _ := l.Digest()
		out = append(out, d.String())
	}
	return out
}

func TestImagesConcurrentGoroutines(t *testing.T) {
	reg := fixture.StartRegistry(t)
	img := imagesLayered(t, 3, "g")
	ref := reg.Push(t, "conc:g", img)
	reg.SetBlobDelay(100 * time.Millisecond)
	s := imagesStore(t, imagecache.Options{})
	var wg sync.WaitGroup
	results := make([]*imagecache.Image, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Ensure(context.Background(), ref, imagecache.PullAlways, nil)
		}()
	}
	wg.Wait()
	for i := range 8 {
		if errs[i] != nil {
			t.Fatalf("puller %d: %v", i, errs[i])
		}
		if !slices.Equal(results[i].LayerDirs, results[0].LayerDirs) {
			t.Errorf("puller %d got other layers", i)
		}
	}
	for _, d := range imagesBlobDigests(t, img) {
		if n := reg.BlobGets(d); n != 1 {
			t.Errorf("blob %s downloaded %d times, want once", d[:19], n)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
		t.Errorf("tmp not empty: %v", entries)
	}
}

// TestImagesHelperProcess is the child of TestImagesConcurrentProcesses.
func TestImagesHelperProcess(t *testing.T) {
	root, ref := os.Getenv("SBX_IMAGES_HELPER_STORE"), os.Getenv("SBX_IMAGES_HELPER_REF")
	if root == "" {
		return // only runs when re-executed as a helper
	}
	s, err := imagecache.Open(root, imagecache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.Pull(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("DIGEST=%s LAYERS=%s\n", img.Digest, strings.Join(img.LayerDirs, ","))
}

func TestImagesConcurrentProcesses(t *testing.T) {
	reg := fixture.StartRegistry(t)
	img := imagesLayered(t, 3, "p")
	ref := reg.Push(t, "conc:p", img)
	reg.SetBlobDelay(300 * time.Millisecond)
	root := filepath.Join(t.TempDir(), "images")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestImagesHelperProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SBX_IMAGES_HELPER_STORE="+root, "SBX_IMAGES_HELPER_REF="+ref)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	var lines []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
		for _, l := range strings.Split(outs[i].String(), "\n") {
			if strings.HasPrefix(l, "DIGEST=") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) != 2 || lines[0] != lines[1] {
		t.Fatalf("processes disagree: %q", lines)
	}
	for _, d := range imagesBlobDigests(t, img) {
		if n := reg.BlobGets(d); n != 1 {
			t.Errorf("blob %s downloaded %d times by 2 processes, want once", d[:19], n)
		}
	}
	s, _ := imagecache.Open(root, imagecache.Options{})
	if imgs, _ := s.List(); len(imgs) != 1 {
		t.Errorf("index holds %d images", len(imgs))
	}
}

func TestImagesGC(t *testing.T) {
	reg := fixture.StartRegistry(t)
	base := imagesSmallLayer(t, "base")
	a := fixture.NewImage(t, v1.Config{}, base, imagesSmallLayer(t, "only a"))
	b := fixture.NewImage(t, v1.Config{}, base, imagesSmallLayer(t, "only b"))
	ctx := context.Background()
	s := imagesStore(t, imagecache.Options{})
	ia, err := s.Pull(ctx, reg.Push(t, "gc:a", a), nil)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := s.Pull(ctx, reg.Push(t, "gc:b", b), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ia.LayerDirs[0] != ib.LayerDirs[0] {
		t.Fatal("the shared base layer is stored twice")
	}
	if err := os.Mkdir(filepath.Join(s.Root(), "tmp", "layer-debris"), 0o700); err != nil {
		t.Fatal(err)
	}
	if res, err := s.GC(ctx, nil); err != nil || len(res.RemovedLayers) != 0 {
		t.Fatalf("gc with every layer in use removed %v (%v)", res.RemovedLayers, err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "tmp", "layer-debris")); !os.IsNotExist(err) {
		t.Error("gc left the debris of an interrupted pull")
	}
	removed, err := s.Remove(ctx, reg.Host+"/gc:a")
	if err != nil || len(removed) != 1 {
		t.Fatalf("remove: %v %v", removed, err)
	}
	if _, err := s.Remove(ctx, reg.Host+"/gc:a"); !errors.Is(err, imagecache.ErrNotFound) {
		t.Errorf("second remove: %v", err)
	}
	res, err := s.GC(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.RemovedLayers) != 1 || res.RemovedLayers[0] != filepath.Base(ia.LayerDirs[1]) {
		t.Errorf("gc removed %v, want only %s", res.RemovedLayers, filepath.Base(ia.LayerDirs[1]))
	}
	for _, d := range ib.LayerDirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("layer of b removed: %v", err)
		}
	}
	if _, err := os.Stat(ia.LayerDirs[1]); !os.IsNotExist(err) {
		t.Error("layer only a used is still there")
	}
	if got, err := s.Resolve(reg.Host + "/gc:b"); err != nil || len(got.LayerDirs) != 2 {
		t.Errorf("b after gc: %v %v", got, err)
	}

	// An unreferenced layer that a mount still uses is kept.
	m := imagesMount(t, ib)
	if _, err := s.Remove(ctx, ib.Digest); err != nil {
		t.Fatal(err)
	}
	res, err = s.GC(ctx, nil)
	if err != nil || len(res.RemovedLayers) != 0 || len(res.KeptInUse) != 2 {
		t.Errorf("gc with b mounted: removed %v kept %v (%v)", res.RemovedLayers, res.KeptInUse, err)
	}
	if err := unix.Unmount(m, 0); err != nil {
		t.Fatal(err)
	}
	res, err = s.GC(ctx, nil)
	if err != nil || len(res.RemovedLayers) != 2 {
		t.Errorf("gc after unmount removed %v (%v)", res.RemovedLayers, err)
	}
}
