package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/fixture"
)

func TestImagesPullBusybox(t *testing.T) {
	reg := fixture.StartRegistry(t)
	img := fixture.BusyboxImage(t)
	ref := reg.Push(t, "library/busybox:1", img)
	s := imagesStore(t, imagecache.Options{})
	ctx := context.Background()

	if _, err := s.Ensure(ctx, ref, imagecache.PullNever, nil); !errors.Is(err, imagecache.ErrNotFound) {
		t.Fatalf("--pull never of an uncached image: got %v, want ErrNotFound", err)
	}
	var phases []imagecache.Phase
	got, err := s.Ensure(ctx, ref, imagecache.PullMissing, func(p imagecache.Progress) { phases = append(phases, p.Phase) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(phases, imagecache.PhaseDone) {
		t.Errorf("progress phases %v lack done", phases)
	}
	want, _ := img.Digest()
	if got.Digest != want.String() {
		t.Errorf("digest %s, want %s", got.Digest, want)
	}
	if len(got.LayerDirs) != 1 || got.Config.Cmd[0] != "sh" || got.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("unexpected image %+v", got)
	}
	if got.Created.Year() != 2025 || got.Size < 1<<20 {
		t.Errorf("created %v size %d", got.Created, got.Size)
	}
	root := got.LayerDirs[0]
	if st := imagesStat(t, filepath.Join(root, "bin/busybox")); st.Mode&0o777 != 0o755 {
		t.Errorf("bin/busybox mode %o", st.Mode)
	}
	if link, err := os.Readlink(filepath.Join(root, "bin/sh")); err != nil || link != "busybox" {
		t.Errorf("bin/sh -> %q, %v", link, err)
	}
	if st := imagesStat(t, filepath.Join(root, "home/user")); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("home/user owned by %d:%d", st.Uid, st.Gid)
	}
	if st, src := imagesStat(t, filepath.Join(root, "tmp")), imagesStat(t, filepath.Join(fixture.BusyboxRootfs(t), "tmp")); st.Mode != src.Mode {
		t.Errorf("tmp mode %o, the fixture has %o", st.Mode, src.Mode)
	}

	// A cache hit resolves without the registry, by name, short name and digest.
	reg.Close()
	for _, r := range []string{ref, got.Digest, got.Digest[7:19]} {
		hit, err := s.Ensure(ctx, r, imagecache.PullMissing, nil)
		if err != nil {
			t.Fatalf("resolve %s: %v", r, err)
		}
		if hit.Digest != got.Digest || !slices.Equal(hit.LayerDirs, got.LayerDirs) {
			t.Errorf("resolve %s gave %+v", r, hit)
		}
	}
	if _, err := s.Ensure(ctx, ref, imagecache.PullAlways, nil); !errors.Is(err, imagecache.ErrUnreachable) {
		t.Errorf("--pull always with the registry down: %v, want ErrUnreachable", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
}

// imagesMultiLayer builds a three-layer image exercising whiteouts, opaque
// directories, hardlinks within and across layers, symlinks (an absolute
// one used as a parent), setuid, capabilities, xattrs, owners and mtimes.
func imagesMultiLayer(t *testing.T) v1.Image {
	mt := time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)
	capNetRaw := "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	l1 := fixture.LayerFromEntries(t, []fixture.Entry{
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/keep", Data: []byte("keep")},
		{Name: "etc/gone", Data: []byte("gone")},
		{Name: "etc/gonedir/", Type: tar.TypeDir},
		{Name: "etc/gonedir/f", Data: []byte("f")},
		{Name: "data/", Type: tar.TypeDir},
		{Name: "data/opq/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "data/opq/old1", Data: []byte("old1")},
		{Name: "data/opq/sub/", Type: tar.TypeDir},
		{Name: "data/opq/sub/old2", Data: []byte("old2")},
		{Name: "bin/", Type: tar.TypeDir},
		{Name: "bin/suid", Mode: 0o4755, Data: []byte("#!/bin/sh\n")},
		{Name: "bin/ping", Mode: 0o755, Data: []byte("ping"), Xattrs: map[string]string{"security.capability": capNetRaw}},
		{Name: "home/u/", Type: tar.TypeDir, UID: 1000, GID: 1000, Mode: 0o700},
		{Name: "home/u/secret", UID: 1000, GID: 1000, Mode: 0o640, Data: []byte("s"), ModTime: mt,
			Xattrs: map[string]string{"user.note": "hi", "trusted.overlay.redirect": "/etc", "security.selinux": "x"}},
		{Name: "x/", Type: tar.TypeDir, Mode: 0o711, UID: 7, GID: 8, ModTime: mt},
		{Name: "x/orig", Data: []byte("hello"), Mode: 0o600, UID: 5},
		{Name: "x/replace", Data: []byte("v1")},
		{Name: "hl/", Type: tar.TypeDir},
		{Name: "hl/a", Data: []byte("same")},
		{Name: "hl/b", Type: tar.TypeLink, Linkname: "hl/a"},
		{Name: "lnk", Type: tar.TypeSymlink, Linkname: "x/orig"},
		{Name: "fifo", Type: tar.TypeFifo},
	})
	l2 := fixture.LayerFromEntries(t, []fixture.Entry{
		{Name: "etc/", Type: tar.TypeDir},
		{Name: "etc/.wh.gone"},
		{Name: "etc/.wh.gonedir"},
		{Name: "data/opq/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "data/opq/new", Data: []byte("new")},
		{Name: "data/opq/.wh..wh..opq"},
		{Name: "hl/c", Type: tar.TypeLink, Linkname: "x/orig"},
		{Name: "x/replace", Data: []byte("v2")},
		{Name: "run/", Type: tar.TypeDir},
		{Name: "var/", Type: tar.TypeDir},
		{Name: "var/run", Type: tar.TypeSymlink, Linkname: "/run"},
		{Name: "var/run/app.pid", Data: []byte("42")},
	})
	l3 := fixture.LayerFromEntries(t, []fixture.Entry{
		{Name: "etc/gonedir/", Type: tar.TypeDir},
		{Name: "etc/gonedir/back", Data: []byte("back")},
	})
	return fixture.NewImage(t, v1.Config{
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
		Env:        []string{"A=1"},
		WorkingDir: "/data",
		User:       "1000:1000",
	}, l1, l2, l3)
}

func TestImagesMultiLayer(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "multi:v1", imagesMultiLayer(t))
	s := imagesStore(t, imagecache.Options{})
	img, err := s.Pull(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.LayerDirs) != 3 {
		t.Fatalf("layers %v", img.LayerDirs)
	}
	if img.Config.WorkingDir != "/data" || img.Config.User != "1000:1000" || img.Config.Entrypoint[0] != "/bin/sh" {
		t.Errorf("config %+v", img.Config)
	}
	l2 := img.LayerDirs[1]
	// Per-layer whiteouts are in overlayfs form.
	for _, w := range []string{"etc/gone", "etc/gonedir"} {
		st := imagesStat(t, filepath.Join(l2, w))
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s is not a 0/0 whiteout: mode %o rdev %d", w, st.Mode, st.Rdev)
		}
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(l2, "data/opq"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("data/opq opaque xattr: %q %v", buf[:n], err)
	}
	// The cross-layer hardlink was copied up: both names in layer 2, one inode.
	if a, c := imagesStat(t, filepath.Join(l2, "x/orig")), imagesStat(t, filepath.Join(l2, "hl/c")); a.Ino != c.Ino || a.Nlink != 2 || a.Uid != 5 || a.Mode&0o777 != 0o600 {
		t.Errorf("hl/c: inode %d vs %d, nlink %d uid %d mode %o", c.Ino, a.Ino, a.Nlink, a.Uid, a.Mode)
	}
	if st := imagesStat(t, filepath.Join(l2, "x")); st.Uid != 7 || st.Mode&0o777 != 0o711 {
		t.Errorf("copied-up parent x: uid %d mode %o", st.Uid, st.Mode&0o777)
	}
	// A file under an absolute symlink stays in the layer.
	if got := imagesReadFile(t, filepath.Join(l2, "run/app.pid")); got != "42" {
		t.Errorf("run/app.pid = %q", got)
	}
	for i, d := range img.LayerDirs {
		if devs, _ := imagesDevices(t, d); len(devs) > 0 {
			t.Errorf("layer %d has device nodes %v", i, devs)
		}
	}

	m := imagesMount(t, img)
	for _, gone := range []string{"etc/gone", "etc/gonedir/f", "data/opq/old1", "data/opq/sub"} {
		if _, err := os.Lstat(filepath.Join(m, gone)); !os.IsNotExist(err) {
			t.Errorf("%s should be hidden, got %v", gone, err)
		}
	}
	checks := map[string]string{
		"etc/keep": "keep", "etc/gonedir/back": "back", "data/opq/new": "new", "hl/a": "same", "hl/b": "same",
		"hl/c": "hello", "x/replace": "v2", "lnk": "hello", "run/app.pid": "42",
	}
	for p, want := range checks {
		if got := imagesReadFile(t, filepath.Join(m, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(m, "data/opq"))
	if len(entries) != 1 {
		t.Errorf("opaque data/opq lists %v", entries)
	}
	if st := imagesStat(t, filepath.Join(m, "data/opq")); st.Mode&0o777 != 0o750 {
		t.Errorf("data/opq mode %o", st.Mode&0o777)
	}
	if a, b := imagesStat(t, filepath.Join(m, "hl/a")), imagesStat(t, filepath.Join(m, "hl/b")); a.Ino != b.Ino {
		t.Error("hl/a and hl/b are not one file")
	}
	if st := imagesStat(t, filepath.Join(m, "bin/suid")); st.Mode&0o7777 != 0o4755 {
		t.Errorf("setuid lost: %o", st.Mode&0o7777)
	}
	buf = make([]byte, 64)
	if n, err := unix.Lgetxattr(filepath.Join(m, "bin/ping"), "security.capability", buf); err != nil || n != 20 {
		t.Errorf("security.capability: n=%d %v", n, err)
	}
	secret := filepath.Join(m, "home/u/secret")
	if st := imagesStat(t, secret); st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o777 != 0o640 {
		t.Errorf("home/u/secret %d:%d %o", st.Uid, st.Gid, st.Mode&0o777)
	}
	if fi, _ := os.Lstat(secret); !fi.ModTime().Equal(time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Errorf("mtime %v", fi.ModTime())
	}
	if n, err := unix.Lgetxattr(secret, "user.note", buf); err != nil || string(buf[:n]) != "hi" {
		t.Errorf("user.note: %q %v", buf[:n], err)
	}
	if _, err := unix.Lgetxattr(filepath.Join(img.LayerDirs[0], "home/u/secret"), "trusted.overlay.redirect", buf); err == nil {
		t.Error("a trusted.overlay xattr from the layer was applied")
	}
	if fi, _ := os.Lstat(filepath.Join(m, "x")); !fi.ModTime().Equal(time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Errorf("directory mtime %v", fi.ModTime())
	}
	if fi, err := os.Lstat(filepath.Join(m, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v %v", fi, err)
	}
}

func TestImagesMultiArch(t *testing.T) {
	reg := fixture.StartRegistry(t)
	mk := func(arch, marker string) v1.Image {
		return fixture.NewImageFor(t, v1.Platform{OS: "linux", Architecture: arch}, v1.Config{Cmd: []string{"/" + marker}},
			fixture.LayerFromEntries(t, []fixture.Entry{{Name: "arch", Data: []byte(marker)}}))
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	idx := fixture.NewIndex(t, mk(runtime.GOARCH, "host"), mk(other, "other"))
	ref := reg.PushIndex(t, "multiarch:latest", idx)
	ctx := context.Background()

	host, err := imagesStore(t, imagecache.Options{}).Pull(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := imagesReadFile(t, filepath.Join(host.LayerDirs[0], "arch")); got != "host" || host.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("default platform picked %q (%s)", got, host.Platform)
	}
	oth, err := imagesStore(t, imagecache.Options{Platform: "linux/" + other}).Pull(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := imagesReadFile(t, filepath.Join(oth.LayerDirs[0], "arch")); got != "other" {
		t.Errorf("--platform linux/%s picked %q", other, got)
	}
	s := imagesStore(t, imagecache.Options{Platform: "linux/s390x"})
	if _, err := s.Pull(ctx, ref, nil); !errors.Is(err, imagecache.ErrUnsupported) {
		t.Errorf("missing platform: %v, want ErrUnsupported", err)
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Errorf("a failed pull recorded %v", imgs)
	}
}

// TestImagesLowerWaitNoDeadlock pulls layers that all need their lower
// layers (implicit parent directories) with one unpack slot: a layer
// waiting for its lowers must not hold the slot they need.
func TestImagesLowerWaitNoDeadlock(t *testing.T) {
	reg := fixture.StartRegistry(t)
	var layers []v1.Layer
	layers = append(layers, fixture.LayerFromEntries(t, []fixture.Entry{{Name: "shared/", Type: tar.TypeDir, Mode: 0o700, UID: 3}}))
	for i := range 6 {
		layers = append(layers, fixture.LayerFromEntries(t, []fixture.Entry{{Name: fmt.Sprintf("shared/f%d", i), Data: []byte("x")}}))
	}
	ref := reg.Push(t, "lowers:1", fixture.NewImage(t, v1.Config{}, layers...))
	s := imagesStore(t, imagecache.Options{Concurrency: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	img, err := s.Pull(ctx, ref, nil)
	if err != nil {
		t.Fatalf("pull (a deadlock ends in a timeout): %v", err)
	}
	// Every implicit shared/ took the owner and mode of the lowest layer.
	for _, d := range img.LayerDirs {
		if st := imagesStat(t, filepath.Join(d, "shared")); st.Uid != 3 || st.Mode&0o777 != 0o700 {
			t.Errorf("%s/shared: uid %d mode %o", d, st.Uid, st.Mode&0o777)
		}
	}
}
