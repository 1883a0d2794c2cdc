package unpack

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

	"github.com/sbxrun/sbx/tests/fixture"
	"golang.org/x/sys/unix"
)

// These tests feed hostile layers straight to Layer as the user running
// them: entries are owned by that user, so no root is needed. What only
// root can do (owners other than the caller, the trusted.overlay.opaque
// xattr) is in layer_root_test.go; the same rules are tested end to end,
// through a registry and the image store, by tests/images_hostile_test.go.

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

func file(name, data string) entry { return entry{name: name, typ: tar.TypeReg, data: data} }
func dir(name string) entry        { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: target}
}
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

// hostileCase is one layer (or a stack of layers, lowest first, each
// unpacked with the ones below as its lower layers) and what must happen.
type hostileCase struct {
	name   string
	layers func(outside string) [][]entry
	limits Limits
	// wantErr: the top layer is refused as hostile (or with ELOOP).
	wantErr bool
	// check runs on the top layer's directory when it was accepted;
	// OUTSIDE in paths stands for the outside directory's path.
	check     func(t *testing.T, top, outside string)
	whiteouts int // whiteouts the layers may create
}

func one(f func(o string) []entry) func(string) [][]entry {
	return func(o string) [][]entry { return [][]entry{f(o)} }
}

// contains checks that the top layer holds rel (OUTSIDE replaced) with
// content "pwned": a neutralised escape landed inside the layer.
func contains(rel string) func(*testing.T, string, string) {
	return func(t *testing.T, top, outside string) {
		p := filepath.Join(top, strings.ReplaceAll(rel, "OUTSIDE", outside))
		if data, err := os.ReadFile(p); err != nil || string(data) != "pwned" {
			t.Errorf("neutralised entry not inside the layer at %s: %q %v", p, data, err)
		}
	}
}

func hostileCases() []hostileCase {
	pwned := func(name string) entry { return file(name, "pwned") }
	return []hostileCase{
		{name: "dotdot", wantErr: true, layers: one(func(string) []entry { return []entry{pwned("../outside/pwned")} })},
		{name: "deep dotdot", wantErr: true, layers: one(func(string) []entry {
			return []entry{pwned("a/b/../../../../../../outside/pwned")}
		})},
		{name: "dotdot inside", wantErr: true, layers: one(func(string) []entry { return []entry{pwned("a/../b")} })},
		{name: "absolute name is clamped", check: contains("OUTSIDE/pwned"), layers: one(func(o string) []entry {
			return []entry{pwned(o + "/pwned")}
		})},
		{name: "relative symlink parent", check: contains("OUTSIDE/pwned"), layers: one(func(o string) []entry {
			return []entry{symlink("link", strings.Repeat("../", 20)+strings.TrimPrefix(o, "/")), pwned("link/pwned")}
		})},
		{name: "absolute symlink parent", check: contains("OUTSIDE/pwned"), layers: one(func(o string) []entry {
			return []entry{symlink("link", o), pwned("link/pwned")}
		})},
		{name: "symlink chain parent", check: contains("OUTSIDE/pwned"), layers: one(func(o string) []entry {
			return []entry{symlink("a", "b"), symlink("b", o), pwned("a/pwned")}
		})},
		{name: "symlink to root", check: contains("OUTSIDE/pwned"), layers: one(func(o string) []entry {
			return []entry{symlink("r", "/"), pwned("r" + o + "/pwned")}
		})},
		// A lower layer's symlink is not this layer's: the entry makes a
		// directory that shadows it in the overlay.
		{name: "symlink parent from a lower layer", check: contains("link/pwned"), layers: func(o string) [][]entry {
			return [][]entry{{symlink("link", o)}, {pwned("link/pwned")}}
		}},
		{name: "symlink loop", wantErr: true, layers: one(func(string) []entry {
			return []entry{symlink("l1", "l2"), symlink("l2", "l1"), pwned("l1/x")}
		})},
		{name: "file replaces leaf symlink", check: contains("evil"), layers: one(func(o string) []entry {
			return []entry{symlink("evil", o+"/canary"), pwned("evil")}
		})},
		{name: "directory replaces leaf symlink", check: contains("evil/pwned"), layers: one(func(o string) []entry {
			return []entry{symlink("evil", o), {name: "evil/", typ: tar.TypeDir, mode: 0o777}, pwned("evil/pwned")}
		})},
		{name: "file replaces directory with escape symlink", check: contains("d"), layers: one(func(string) []entry {
			return []entry{dir("d/"), symlink("d/s", "/"), pwned("d")}
		})},
		{name: "hardlink to absolute outside", wantErr: true, layers: one(func(o string) []entry {
			return []entry{hardlink("hl", o+"/canary")}
		})},
		{name: "hardlink with dotdot", wantErr: true, layers: one(func(string) []entry {
			return []entry{hardlink("hl", "../outside/canary")}
		})},
		{name: "hardlink through symlink", wantErr: true, layers: one(func(o string) []entry {
			return []entry{symlink("s", o), hardlink("hl", "s/canary")}
		})},
		{name: "hardlink through lower-layer symlink", wantErr: true, layers: func(o string) [][]entry {
			return [][]entry{{symlink("s", o)}, {hardlink("hl", "s/canary")}}
		}},
		{name: "hardlink to directory", wantErr: true, layers: one(func(string) []entry {
			return []entry{dir("d/"), hardlink("hl", "d")}
		})},
		{name: "hardlink to itself", wantErr: true, layers: one(func(string) []entry {
			return []entry{hardlink("hl", "hl")}
		})},
		{name: "hardlink to the layer root", wantErr: true, layers: one(func(string) []entry {
			return []entry{hardlink("hl", "/")}
		})},
		{name: "hardlink to outside symlink links the symlink", check: contains("hl"), layers: one(func(o string) []entry {
			return []entry{symlink("s", o+"/canary"), hardlink("hl", "s"), pwned("hl")}
		})},
		{name: "hardlink to a whiteout", wantErr: true, whiteouts: 1, layers: one(func(string) []entry {
			return []entry{{name: ".wh.gone"}, hardlink("hl", "gone")}
		})},
		{name: "char device skipped", layers: one(func(string) []entry {
			return []entry{{name: "dev/null", typ: tar.TypeChar, devmajor: 1}}
		})},
		{name: "block device skipped", layers: one(func(string) []entry {
			return []entry{{name: "sda", typ: tar.TypeBlock, devmajor: 8}}
		})},
		{name: "fake whiteout device skipped", layers: one(func(string) []entry {
			return []entry{{name: "etc", typ: tar.TypeChar}}
		})},
		{name: "device through symlink skipped", layers: one(func(o string) []entry {
			return []entry{symlink("s", o), {name: "s/kmem", typ: tar.TypeChar, devmajor: 1}}
		})},
		{name: "whiteout of dot", wantErr: true, layers: one(func(string) []entry { return []entry{{name: "a/.wh.."}} })},
		{name: "whiteout of dotdot", wantErr: true, layers: one(func(string) []entry { return []entry{{name: "a/.wh..."}} })},
		{name: "opaque root", wantErr: true, layers: one(func(string) []entry { return []entry{{name: ".wh..wh..opq"}} })},
		{name: "opaque root through symlink", wantErr: true, layers: one(func(string) []entry {
			return []entry{symlink("s", "/"), {name: "s/.wh..wh..opq"}}
		})},
		{name: "whiteout through symlink stays inside", whiteouts: 1, layers: one(func(o string) []entry {
			return []entry{symlink("s", o), {name: "s/.wh.canary"}}
		})},
		{name: "dir mtime through a later symlink", layers: one(func(o string) []entry {
			return []entry{dir("x/"), {name: "x/dir/", typ: tar.TypeDir, mode: 0o755, mtime: time.Unix(1e9, 0)}, symlink("x", o)}
		})},
		{name: "implicit dir metadata through a later symlink", layers: func(o string) [][]entry {
			return [][]entry{
				{dir("y/"), {name: "y/dir/", typ: tar.TypeDir, mode: 0o700}},
				{pwned("y/dir/f"), symlink("y", o)},
			}
		}},
		{name: "layer root as a file", wantErr: true, layers: one(func(string) []entry { return []entry{pwned(".")} })},
		{name: "decompression bomb", wantErr: true, limits: Limits{MaxBytes: 8 << 20}, layers: one(func(string) []entry {
			return []entry{file("zeros", string(make([]byte, 40<<20)))}
		})},
		{name: "too many entries", wantErr: true, limits: Limits{MaxEntries: 1000}, layers: one(func(string) []entry {
			var es []entry
			for i := range 1200 {
				es = append(es, file(fmt.Sprintf("f%d", i), ""))
			}
			return es
		})},
		{name: "path too long", wantErr: true, limits: Limits{MaxPathLen: 200}, layers: one(func(string) []entry {
			return []entry{pwned(strings.Repeat("x", 300))}
		})},
		{name: "symlink target too long", wantErr: true, limits: Limits{MaxPathLen: 200}, layers: one(func(string) []entry {
			return []entry{symlink("s", strings.Repeat("y", 300))}
		})},
		{name: "hardlink target too long", wantErr: true, limits: Limits{MaxPathLen: 200}, layers: one(func(string) []entry {
			return []entry{hardlink("h", strings.Repeat("y", 300))}
		})},
		{name: "path too deep", wantErr: true, layers: one(func(string) []entry {
			return []entry{pwned(strings.Repeat("d/", 200) + "f")}
		})},
		{name: "xattrs other than user and security.capability dropped", layers: one(func(o string) []entry {
			return []entry{{name: "d/", typ: tar.TypeDir, mode: 0o755, xattrs: map[string]string{
				"trusted.overlay.redirect": o, "security.selinux": "system_u:object_r:shadow_t:s0", "system.posix_acl_access": "x",
			}}}
		}), check: func(t *testing.T, top, _ string) {
			for _, x := range []string{"trusted.overlay.redirect", "security.selinux", "system.posix_acl_access"} {
				if _, err := unix.Lgetxattr(filepath.Join(top, "d"), x, make([]byte, 64)); err == nil {
					t.Errorf("%s was applied", x)
				}
			}
		}},
	}
}

// TestLayerHostile unpacks each hostile layer into a fresh directory beside
// an "outside" directory and checks that it was refused as hostile or
// neutralised inside the layer, that nothing outside the layers changed,
// and that no device node (beyond the expected whiteouts) was created.
func TestLayerHostile(t *testing.T) {
	cases := hostileCases()
	if len(cases) < 40 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(filepath.Join(outside, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644); err != nil {
				t.Fatal(err)
			}
			layersDir := filepath.Join(base, "layers")
			before := snapshot(t, outside)
			stack := c.layers(outside)
			var lowers []string // topmost first
			var err error
			var top string
			for i, entries := range stack {
				top = filepath.Join(layersDir, fmt.Sprint(i))
				if err := os.MkdirAll(top, 0o755); err != nil {
					t.Fatal(err)
				}
				below := append([]string(nil), lowers...)
				_, err = Layer(context.Background(), bytes.NewReader(layerTar(t, entries...)), top, Options{
					Limits: c.limits,
					Lower:  func(context.Context) ([]string, error) { return below, nil },
				})
				if i < len(stack)-1 && err != nil {
					t.Fatalf("lower layer %d: %v", i, err)
				}
				lowers = append([]string{top}, lowers...)
			}
			switch {
			case c.wantErr && err == nil:
				t.Errorf("hostile layer accepted")
			case c.wantErr && !errors.Is(err, ErrHostile) && !errors.Is(err, unix.ELOOP):
				t.Errorf("refused, but not as hostile: %v", err)
			case !c.wantErr && err != nil:
				t.Errorf("layer should be neutralised, got %v", err)
			}
			if err == nil && c.check != nil {
				c.check(t, top, outside)
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
			devs, wh := devices(t, layersDir)
			if len(devs) > 0 {
				t.Errorf("device nodes created: %v", devs)
			}
			if wh > c.whiteouts {
				t.Errorf("%d whiteouts, want at most %d", wh, c.whiteouts)
			}
		})
	}
}

// TestLayerSparseBomb feeds a PAX sparse file whose holes expand to 1 GiB.
func TestLayerSparseBomb(t *testing.T) {
	raw := fixture.SparseBombTar(t, 1<<30, os.Getuid(), os.Getgid())
	dir := t.TempDir()
	_, err := Layer(context.Background(), bytes.NewReader(raw), dir, Options{Limits: Limits{MaxBytes: 16 << 20}})
	if !errors.Is(err, ErrHostile) {
		t.Fatalf("sparse bomb: %v, want ErrHostile", err)
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
	stats, err := Layer(context.Background(), bytes.NewReader(layerTar(t,
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
	)), dir, Options{})
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
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t, file("a", "kept"), entry{name: ".wh.a"})), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(data) != "kept" {
		t.Errorf("a: %q %v", data, err)
	}
	// AUFS metadata other than whiteouts is ignored.
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t, entry{name: ".wh..wh.plnk"})), t.TempDir(), Options{}); err != nil {
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
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t,
		entry{name: "opt/", typ: tar.TypeDir, mode: 0o750, mtime: lowerTime},
		entry{name: "opt/tool", typ: tar.TypeReg, data: "tool", mode: 0o755},
		entry{name: "gone", typ: tar.TypeReg, data: "x"},
	)), lower, Options{}); err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	asked := 0
	stats, err := Layer(context.Background(), bytes.NewReader(layerTar(t,
		hardlink("bin/tool", "opt/tool"),
		hardlink("early", "late"),
		file("late", "late"),
		hardlink("replaced", "opt/tool"),
		file("replaced", "mine"),
	)), top, Options{Lower: func(context.Context) ([]string, error) { asked++; return []string{lower}, nil }})
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
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t, entry{name: ".wh.gone"})), wh, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"gone", "nowhere"} {
		_, err := Layer(context.Background(), bytes.NewReader(layerTar(t, hardlink("l", target))), t.TempDir(),
			Options{Lower: func(context.Context) ([]string, error) { return []string{wh, lower}, nil }})
		if !errors.Is(err, ErrHostile) {
			t.Errorf("hard link to %s: %v, want ErrHostile", target, err)
		}
	}
	// A lower layer that cannot be had fails the link with its error.
	boom := errors.New("lower layer not ready")
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t, hardlink("l", "opt/tool"))), t.TempDir(),
		Options{Lower: func(context.Context) ([]string, error) { return nil, boom }}); !errors.Is(err, boom) {
		t.Errorf("lower layers failing: %v", err)
	}
}

// TestLayerImplicitDirsFromLower: a directory the layer creates without an
// entry for it gets the owner, mode and mtime it has in the lower layers.
func TestLayerImplicitDirsFromLower(t *testing.T) {
	lower := t.TempDir()
	when := time.Unix(1_200_000_000, 0)
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t,
		entry{name: "srv/", typ: tar.TypeDir, mode: 0o711, mtime: when},
	)), lower, Options{}); err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	if _, err := Layer(context.Background(), bytes.NewReader(layerTar(t, file("srv/index.html", "hi"), file("new/f", "x"))), top,
		Options{Lower: func(context.Context) ([]string, error) { return []string{lower}, nil }}); err != nil {
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
	if _, err := Layer(ctx, bytes.NewReader(layerTar(t, file("a", "x"))), t.TempDir(), Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	_, err := Layer(context.Background(), io.MultiReader(strings.NewReader(strings.Repeat("not a tar ", 100))), t.TempDir(), Options{})
	if err == nil || !strings.Contains(err.Error(), "read layer tar") {
		t.Errorf("garbage: %v", err)
	}
}

// TestLimitsOr: zero and negative fields take the defaults.
func TestLimitsOr(t *testing.T) {
	got := Limits{MaxBytes: 1, MaxEntries: -1}.Or(DefaultLimits)
	want := Limits{MaxBytes: 1, MaxEntries: DefaultLimits.MaxEntries, MaxPathLen: DefaultLimits.MaxPathLen, MaxDepth: DefaultLimits.MaxDepth}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}
