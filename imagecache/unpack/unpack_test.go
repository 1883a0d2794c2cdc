package unpack_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// These tests feed layers straight to Layer as the user running them, with
// entries owned by that user, so no root is needed. The hostile layers are
// fixture.HostileLayers, which tests/images/hostile_test.go also runs end to
// end through a registry and the image store; the few that set owners other
// than the caller or the trusted.overlay.opaque xattr need root
// (roottest.Require: make test runs them).

// entry is one tar entry of a test layer.
type entry struct {
	name     string
	typ      byte
	data     string
	link     string
	mode     int64
	uid      int // -1: the caller's
	mtime    time.Time
	xattrs   map[string]string
	devmajor int64
}

func file(name, data string) entry       { return entry{name: name, typ: tar.TypeReg, data: data} }
func hardlink(name, target string) entry { return entry{name: name, typ: tar.TypeLink, link: target} }

// layerTar writes entries as a tar stream owned by the caller.
func layerTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		uid := os.Getuid()
		if e.uid > 0 {
			uid = e.uid
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: mode, Uid: uid, Gid: os.Getgid(),
			Size: int64(len(e.data)), ModTime: e.mtime, Devmajor: e.devmajor, Format: tar.FormatPAX}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		for k, v := range e.xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// snapshot records every path under dir with its type, mode, size, link
// target and content hash; two snapshots differ when anything changed.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			desc += " -> " + l
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			sum := sha256.Sum256(data)
			desc += " " + hex.EncodeToString(sum[:8])
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// devices lists the device nodes under dir; whiteouts are character
// devices 0/0 and are counted apart.
func devices(t testing.TB, dir string) (devs []string, whiteouts int) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev == 0 {
				whiteouts++
				return nil
			}
			devs = append(devs, p)
		case unix.S_IFBLK:
			devs = append(devs, p)
		}
		return nil
	})
	return devs, whiteouts
}

// TestLayerHostile unpacks each hostile layer into a fresh directory beside
// an "outside" directory and checks that it was refused as hostile or
// neutralised inside the layer, that nothing outside the layers changed,
// and that no device node (beyond the expected whiteouts) was created.
func TestLayerHostile(t *testing.T) {
	cases := fixture.HostileLayers()
	if len(cases) < 40 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.NeedsRoot {
				roottest.Require(t, "the layer sets other owners or trusted xattrs")
			}
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(filepath.Join(outside, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644); err != nil {
				t.Fatal(err)
			}
			probe := fmt.Sprintf("/tmp/sbx-unpack-probe-%d-%d", os.Getpid(), i)
			layersDir := filepath.Join(base, "layers")
			before := snapshot(t, outside)
			stack := c.Layers(outside, probe)
			var lowers []string // topmost first
			var err error
			var top string
			for i, entries := range stack {
				top = filepath.Join(layersDir, fmt.Sprint(i))
				if err := os.MkdirAll(top, 0o755); err != nil {
					t.Fatal(err)
				}
				below := append([]string(nil), lowers...)
				layer := fixture.TarBytes(t, fixture.OwnedBy(entries, os.Getuid(), os.Getgid()))
				_, err = unpack.Layer(context.Background(), bytes.NewReader(layer), top, unpack.Options{
					Limits: c.Limits,
					Lower:  func(context.Context) ([]string, error) { return below, nil },
				})
				if i < len(stack)-1 && err != nil {
					t.Fatalf("lower layer %d: %v", i, err)
				}
				lowers = append([]string{top}, lowers...)
			}
			switch {
			case c.WantErr && err == nil:
				t.Errorf("hostile layer accepted")
			case c.WantErr && !errors.Is(err, unpack.ErrHostile) && !errors.Is(err, unix.ELOOP):
				t.Errorf("refused, but not as hostile: %v", err)
			case !c.WantErr && err != nil:
				t.Errorf("layer should be neutralised, got %v", err)
			}
			if err == nil && c.Check != nil {
				c.Check(t, top, outside)
			}
			after := snapshot(t, outside)
			for p, d := range before {
				if after[p] != d {
					t.Errorf("outside changed: %s: %q -> %q", p, d, after[p])
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("created outside: %s", p)
				}
			}
			if entries, _ := os.ReadDir(base); len(entries) != 2 {
				t.Errorf("created beside the layers: %v", entries)
			}
			if _, err := os.Lstat(probe); !os.IsNotExist(err) {
				t.Errorf("host path %s was created", probe)
				os.RemoveAll(probe)
			}
			devs, wh := devices(t, layersDir)
			if len(devs) > 0 {
				t.Errorf("device nodes created: %v", devs)
			}
			if wh > c.Whiteouts {
				t.Errorf("%d whiteouts, want at most %d", wh, c.Whiteouts)
			}
		})
	}
}

// TestLayerSparseBomb feeds a PAX sparse file whose holes expand to 1 GiB.
func TestLayerSparseBomb(t *testing.T) {
	raw := fixture.SparseBombTar(t, 1<<30, os.Getuid(), os.Getgid())
	dir := t.TempDir()
	_, err := unpack.Layer(context.Background(), bytes.NewReader(raw), dir, unpack.Options{Limits: unpack.Limits{MaxBytes: 16 << 20}})
	if !errors.Is(err, unpack.ErrHostile) {
		t.Fatalf("sparse bomb: %v, want unpack.ErrHostile", err)
	}
}

// TestLayerContent: a well-formed layer comes out as written: files with
// contents, modes (setuid and sticky bits included), mtimes and user
// xattrs, directories, symlinks, hard links, FIFOs, whiteouts, and the
// statistics of what was done.
func TestLayerContent(t *testing.T) {
	mtime := time.Unix(1_500_000_000, 0)
	dirTime := time.Unix(1_400_000_000, 0)
	dir := t.TempDir()
	stats, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t,
		entry{name: "etc/", typ: tar.TypeDir, mode: 0o755, mtime: dirTime},
		entry{name: "etc/passwd", typ: tar.TypeReg, data: "root:x:0:0::/root:/bin/sh\n", mode: 0o644, mtime: mtime},
		entry{name: "usr/bin/su", typ: tar.TypeReg, data: "elf", mode: 0o4755},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "bin/sh", typ: tar.TypeSymlink, link: "/usr/bin/busybox"},
		entry{name: "etc/passwd-", typ: tar.TypeLink, link: "etc/passwd"},
		entry{name: "run/fifo", typ: tar.TypeFifo, mode: 0o600},
		entry{name: "var/.wh.cache"},
		entry{name: "dev/sda", typ: tar.TypeBlock, devmajor: 8},
		entry{name: "x/attr", typ: tar.TypeReg, data: "a", xattrs: map[string]string{"user.note": "hello", "trusted.bad": "x"}},
	)), dir, unpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Entries != 10 || stats.Bytes != int64(len("root:x:0:0::/root:/bin/sh\n")+len("elf")+len("a")) ||
		stats.SkippedDevices != 1 || stats.SkippedXattrs != 1 || stats.UsedLower {
		t.Errorf("stats %+v", stats)
	}
	fi, err := os.Stat(filepath.Join(dir, "etc/passwd"))
	if err != nil || fi.Mode().Perm() != 0o644 || !fi.ModTime().Equal(mtime) {
		t.Errorf("etc/passwd: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "usr/bin/su")); err != nil || fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("setuid file: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("sticky directory: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "etc")); err != nil || !fi.ModTime().Equal(dirTime) {
		t.Errorf("a directory's mtime is set after its entries: %v %v", fi.ModTime(), err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || l != "/usr/bin/busybox" {
		t.Errorf("symlink: %q %v", l, err)
	}
	var a, b unix.Stat_t
	if unix.Lstat(filepath.Join(dir, "etc/passwd"), &a) != nil || unix.Lstat(filepath.Join(dir, "etc/passwd-"), &b) != nil || a.Ino != b.Ino {
		t.Error("etc/passwd- is not a hard link of etc/passwd")
	}
	if fi, err := os.Lstat(filepath.Join(dir, "run/fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v %v", fi, err)
	}
	var wh unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "var/cache"), &wh); err != nil || wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("whiteout var/cache: mode %o rdev %d %v", wh.Mode, wh.Rdev, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dev/sda")); !os.IsNotExist(err) {
		t.Errorf("a block device was created: %v", err)
	}
	val := make([]byte, 16)
	if n, err := unix.Lgetxattr(filepath.Join(dir, "x/attr"), "user.note", val); err != nil || string(val[:n]) != "hello" {
		t.Errorf("user xattr: %q %v", val[:n], err)
	}
}

// TestLayerWhiteoutKeepsThisLayersEntry: a whiteout hides lower layers
// only; an entry of the same layer stays.
func TestLayerWhiteoutKeepsThisLayersEntry(t *testing.T) {
	dir := t.TempDir()
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, file("a", "kept"), entry{name: ".wh.a"})), dir, unpack.Options{}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(data) != "kept" {
		t.Errorf("a: %q %v", data, err)
	}
	// AUFS metadata other than whiteouts is ignored.
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, entry{name: ".wh..wh.plnk"})), t.TempDir(), unpack.Options{}); err != nil {
		t.Errorf(".wh..wh.plnk: %v", err)
	}
}

// TestLayerHardlinkAcrossLayers: a hard link to a file of a lower layer
// copies the file up into this layer (as overlayfs does on link), with its
// parents' metadata; a link whose target comes later in the same layer is
// made at the end; a link replaced later in the layer is not made.
func TestLayerHardlinkAcrossLayers(t *testing.T) {
	lower := t.TempDir()
	lowerTime := time.Unix(1_300_000_000, 0)
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t,
		entry{name: "opt/", typ: tar.TypeDir, mode: 0o750, mtime: lowerTime},
		entry{name: "opt/tool", typ: tar.TypeReg, data: "tool", mode: 0o755},
		entry{name: "gone", typ: tar.TypeReg, data: "x"},
	)), lower, unpack.Options{}); err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	asked := 0
	stats, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t,
		hardlink("bin/tool", "opt/tool"),
		hardlink("early", "late"),
		file("late", "late"),
		hardlink("replaced", "opt/tool"),
		file("replaced", "mine"),
	)), top, unpack.Options{Lower: func(context.Context) ([]string, error) { asked++; return []string{lower}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !stats.UsedLower || asked == 0 {
		t.Errorf("the lower layers were not used: %+v, asked %d", stats, asked)
	}
	var a, b unix.Stat_t
	if unix.Lstat(filepath.Join(top, "opt/tool"), &a) != nil || unix.Lstat(filepath.Join(top, "bin/tool"), &b) != nil || a.Ino != b.Ino {
		t.Fatal("bin/tool is not a hard link of the copied-up opt/tool")
	}
	if data, _ := os.ReadFile(filepath.Join(top, "bin/tool")); string(data) != "tool" || a.Mode&0o777 != 0o755 {
		t.Errorf("copied-up file: %q mode %o", data, a.Mode&0o777)
	}
	if fi, err := os.Stat(filepath.Join(top, "opt")); err != nil || fi.Mode().Perm() != 0o750 || !fi.ModTime().Equal(lowerTime) {
		t.Errorf("copied-up parent: %v %v", fi, err)
	}
	if data, err := os.ReadFile(filepath.Join(top, "early")); err != nil || string(data) != "late" {
		t.Errorf("link to a later entry: %q %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(top, "replaced")); err != nil || string(data) != "mine" {
		t.Errorf("a link replaced later in the layer: %q %v", data, err)
	}

	// A target that is whited out in the lower layer, or in no layer, is refused.
	wh := t.TempDir()
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, entry{name: ".wh.gone"})), wh, unpack.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"gone", "nowhere"} {
		_, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, hardlink("l", target))), t.TempDir(),
			unpack.Options{Lower: func(context.Context) ([]string, error) { return []string{wh, lower}, nil }})
		if !errors.Is(err, unpack.ErrHostile) {
			t.Errorf("hard link to %s: %v, want unpack.ErrHostile", target, err)
		}
	}
	// A lower layer that cannot be had fails the link with its error.
	boom := errors.New("lower layer not ready")
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, hardlink("l", "opt/tool"))), t.TempDir(),
		unpack.Options{Lower: func(context.Context) ([]string, error) { return nil, boom }}); !errors.Is(err, boom) {
		t.Errorf("lower layers failing: %v", err)
	}
}

// TestLayerImplicitDirsFromLower: a directory the layer creates without an
// entry for it gets the owner, mode and mtime it has in the lower layers.
func TestLayerImplicitDirsFromLower(t *testing.T) {
	lower := t.TempDir()
	when := time.Unix(1_200_000_000, 0)
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t,
		entry{name: "srv/", typ: tar.TypeDir, mode: 0o711, mtime: when},
	)), lower, unpack.Options{}); err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	if _, err := unpack.Layer(context.Background(), bytes.NewReader(layerTar(t, file("srv/index.html", "hi"), file("new/f", "x"))), top,
		unpack.Options{Lower: func(context.Context) ([]string, error) { return []string{lower}, nil }}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(top, "srv")); err != nil || fi.Mode().Perm() != 0o711 || !fi.ModTime().Equal(when) {
		t.Errorf("implicit srv: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(top, "new")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("implicit new (in no lower layer): %v %v", fi, err)
	}
}

// TestLayerStops: a cancelled context stops the unpack, and a stream that
// is not a tar is an error that says so.
func TestLayerStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := unpack.Layer(ctx, bytes.NewReader(layerTar(t, file("a", "x"))), t.TempDir(), unpack.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	_, err := unpack.Layer(context.Background(), io.MultiReader(strings.NewReader(strings.Repeat("not a tar ", 100))), t.TempDir(), unpack.Options{})
	if err == nil || !strings.Contains(err.Error(), "read layer tar") {
		t.Errorf("garbage: %v", err)
	}
}

// TestLimitsOr: zero and negative fields take the defaults.
func TestLimitsOr(t *testing.T) {
	got := unpack.Limits{MaxBytes: 1, MaxEntries: -1}.Or(unpack.DefaultLimits)
	want := unpack.Limits{MaxBytes: 1, MaxEntries: unpack.DefaultLimits.MaxEntries, MaxPathLen: unpack.DefaultLimits.MaxPathLen, MaxDepth: unpack.DefaultLimits.MaxDepth}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}
