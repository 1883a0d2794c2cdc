package tests

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/tests/fixture"
)

type hostileCase struct {
	name string
	// layers builds the image's layers; outside is a directory next to the
	// store that must stay untouched, probe a host path that must not appear.
	layers    func(outside, probe string) [][]fixture.Entry
	limits    unpack.Limits
	wantErr   bool
	whiteouts int // overlayfs whiteouts the image may contain
	check     func(t *testing.T, img *imagecache.Image, outside string)
}

// imagesSnapshot records every file under dir (outside the store) with its
// type, mode, owner, link count, size, mtime, content hash and link target.
func imagesSnapshot(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		if p == dir {
			return nil // creating the store changes dir itself
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%o %d:%d n%d s%d %d", st.Mode, st.Uid, st.Gid, st.Nlink, st.Size, fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			desc += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			desc += " -> " + l
		}
		var x [64]byte
		for _, name := range []string{"trusted.overlay.opaque", "user.x"} {
			if n, err := unix.Lgetxattr(p, name, x[:]); err == nil {
				desc += " " + name + "=" + string(x[:n])
			}
		}
		snap[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func hostileCases() []hostileCase {
	one := func(f func(outside, probe string) []fixture.Entry) func(string, string) [][]fixture.Entry {
		return func(o, p string) [][]fixture.Entry { return [][]fixture.Entry{f(o, p)} }
	}
	fileAt := func(name string) fixture.Entry { return fixture.Entry{Name: name, Data: []byte("pwned")} }
	sym := func(name, target string) fixture.Entry {
		return fixture.Entry{Name: name, Type: tar.TypeSymlink, Linkname: target}
	}
	hard := func(name, target string) fixture.Entry {
		return fixture.Entry{Name: name, Type: tar.TypeLink, Linkname: target}
	}
	inLayer := func(rel string) func(*testing.T, *imagecache.Image, string) {
		return func(t *testing.T, img *imagecache.Image, outside string) {
			top := img.LayerDirs[len(img.LayerDirs)-1]
			p := filepath.Join(top, strings.ReplaceAll(rel, "OUTSIDE", outside))
			if data, err := os.ReadFile(p); err != nil || string(data) != "pwned" {
				t.Errorf("neutralised entry not inside the layer at %s: %q %v", p, data, err)
			}
		}
	}
	return []hostileCase{
		{name: "dotdot", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt("../outside/pwned")}
		})},
		{name: "deep dotdot", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt("a/b/../../../../../../outside/pwned")}
		})},
		{name: "dotdot inside", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt("a/../b")}
		})},
		{name: "absolute name is clamped", check: inLayer("OUTSIDE/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt(o + "/pwned")}
		})},
		{name: "absolute host path is clamped", layers: one(func(_, p string) []fixture.Entry {
			return []fixture.Entry{fileAt(p)}
		})},
		{name: "relative symlink parent", check: inLayer("OUTSIDE/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("link", strings.Repeat("../", 20)+strings.TrimPrefix(o, "/")), fileAt("link/pwned")}
		})},
		{name: "absolute symlink parent", check: inLayer("OUTSIDE/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("link", o), fileAt("link/pwned")}
		})},
		{name: "symlink chain parent", check: inLayer("OUTSIDE/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("a", "b"), sym("b", o), fileAt("a/pwned")}
		})},
		{name: "symlink to root", check: inLayer("OUTSIDE/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("r", "/"), fileAt("r" + o + "/pwned")}
		})},
		{name: "symlink loop", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("l1", "l2"), sym("l2", "l1"), fileAt("l1/x")}
		})},
		{name: "file replaces leaf symlink", check: inLayer("evil"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("evil", o+"/canary"), fileAt("evil")}
		})},
		{name: "directory replaces leaf symlink", check: inLayer("evil/pwned"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("evil", o), {Name: "evil/", Type: tar.TypeDir, Mode: 0o777}, fileAt("evil/pwned")}
		})},
		{name: "hardlink to absolute outside", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{hard("hl", o+"/canary")}
		})},
		{name: "hardlink with dotdot", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{hard("hl", "../outside/canary")}
		})},
		{name: "hardlink through symlink", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", o), hard("hl", "s/canary")}
		})},
		{name: "hardlink through lower-layer symlink", wantErr: true, layers: func(o, _ string) [][]fixture.Entry {
			return [][]fixture.Entry{{sym("s", o)}, {hard("hl", "s/canary")}}
		}},
		{name: "hardlink to directory", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "d/", Type: tar.TypeDir}, hard("hl", "d")}
		})},
		{name: "hardlink to outside symlink links the symlink", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", o+"/canary"), hard("hl", "s"), fileAt("hl")}
		}), check: inLayer("hl")},
		{name: "char device skipped", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "dev/null", Type: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}}
		})},
		{name: "block device skipped", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "sda", Type: tar.TypeBlock, Devmajor: 8, Devminor: 0, Mode: 0o666}}
		})},
		{name: "fake whiteout device skipped", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "etc", Type: tar.TypeChar}}
		})},
		{name: "device through symlink skipped", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", o), {Name: "s/kmem", Type: tar.TypeChar, Devmajor: 1, Devminor: 2}}
		})},
		{name: "whiteout of dot", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "a/.wh.."}}
		})},
		{name: "whiteout of dotdot", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "a/.wh..."}}
		})},
		{name: "opaque root", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: ".wh..wh..opq"}}
		})},
		{name: "opaque root through symlink", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", "/"), {Name: "s/.wh..wh..opq"}}
		})},
		{name: "whiteout through symlink stays inside", whiteouts: 1, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", o), {Name: "s/.wh.canary"}}
		})},
		{name: "opaque through symlink stays inside", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", o), {Name: "s/.wh..wh..opq"}}
		})},
		{name: "trusted and security xattrs dropped", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "d/", Type: tar.TypeDir, Xattrs: map[string]string{
				"trusted.overlay.opaque": "y", "trusted.overlay.redirect": o, "security.selinux": "system_u:object_r:shadow_t:s0",
			}}}
		}), check: func(t *testing.T, img *imagecache.Image, _ string) {
			d := filepath.Join(img.LayerDirs[0], "d")
			for _, x := range []string{"trusted.overlay.opaque", "trusted.overlay.redirect", "security.selinux"} {
				if _, err := unix.Lgetxattr(d, x, make([]byte, 64)); err == nil {
					t.Errorf("%s was applied", x)
				}
			}
		}},
		{name: "file replaces directory with escape symlink", check: inLayer("d"), layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "d/", Type: tar.TypeDir}, sym("d/s", "/"), fileAt("d")}
		})},
		{name: "dir mtime through a later symlink", layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "x/", Type: tar.TypeDir}, {Name: "x/dir/", Type: tar.TypeDir, ModTime: time.Unix(1e9, 0)}, sym("x", o)}
		})},
		{name: "implicit dir metadata through a later symlink", layers: func(o, _ string) [][]fixture.Entry {
			return [][]fixture.Entry{
				{{Name: "y/", Type: tar.TypeDir}, {Name: "y/dir/", Type: tar.TypeDir, Mode: 0o700, UID: 4242}},
				{fileAt("y/dir/f"), sym("y", o)},
			}
		}},
		{name: "layer root as a file", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt(".")}
		})},
		{name: "decompression bomb", wantErr: true, limits: unpack.Limits{MaxBytes: 8 << 20}, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{{Name: "zeros", Data: make([]byte, 40<<20)}}
		})},
		{name: "too many entries", wantErr: true, limits: unpack.Limits{MaxEntries: 1000}, layers: one(func(o, _ string) []fixture.Entry {
			var es []fixture.Entry
			for i := range 1200 {
				es = append(es, fixture.Entry{Name: fmt.Sprintf("f%d", i)})
			}
			return es
		})},
		{name: "path too long", wantErr: true, limits: unpack.Limits{MaxPathLen: 200}, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt(strings.Repeat("x", 300))}
		})},
		{name: "symlink target too long", wantErr: true, limits: unpack.Limits{MaxPathLen: 200}, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{sym("s", strings.Repeat("y", 300))}
		})},
		{name: "path too deep", wantErr: true, layers: one(func(o, _ string) []fixture.Entry {
			return []fixture.Entry{fileAt(strings.Repeat("d/", 200) + "f")}
		})},
	}
}

func TestImagesHostileLayers(t *testing.T) {
	reg := fixture.StartRegistry(t)
	cases := hostileCases()
	if len(cases) < 25 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(filepath.Join(outside, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644); err != nil {
				t.Fatal(err)
			}
			probe := fmt.Sprintf("/tmp/sbx-hostile-probe-%d-%d", os.Getpid(), i)
			storeRoot := filepath.Join(base, "store")
			before := imagesSnapshot(t, base, storeRoot)

			var layers []v1.Layer
			for _, entries := range c.layers(outside, probe) {
				layers = append(layers, fixture.LayerFromEntries(t, entries))
			}
			ref := reg.Push(t, fmt.Sprintf("hostile:c%d", i), fixture.NewImage(t, v1.Config{}, layers...))
			s, err := imagecache.Open(filepath.Join(storeRoot, "images"), imagecache.Options{Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			img, err := s.Pull(context.Background(), ref, nil)
			switch {
			case c.wantErr && err == nil:
				t.Errorf("hostile layer accepted")
			case c.wantErr && !errors.Is(err, unpack.ErrHostile) && !errors.Is(err, unix.ELOOP):
				t.Errorf("refused, but not as hostile: %v", err)
			case !c.wantErr && err != nil:
				t.Errorf("layer should be neutralised, got %v", err)
			}
			if err == nil && c.check != nil {
				c.check(t, img, outside)
			}
			if c.wantErr {
				if imgs, _ := s.List(); len(imgs) != 0 {
					t.Errorf("refused image recorded: %v", imgs)
				}
				if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
					t.Errorf("refused layer left in tmp: %v", entries)
				}
			}

			// Nothing outside the store changed, nothing appeared on the host.
			after := imagesSnapshot(t, base, storeRoot)
			for p, d := range before {
				if after[p] != d {
					t.Errorf("outside the store changed: %s: %q -> %q", p, d, after[p])
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("created outside the store: %s", p)
				}
			}
			if _, err := os.Lstat(probe); !os.IsNotExist(err) {
				t.Errorf("host path %s was created", probe)
				os.RemoveAll(probe)
			}
			devs, wh := imagesDevices(t, storeRoot)
			if len(devs) > 0 {
				t.Errorf("device nodes created: %v", devs)
			}
			if wh > c.whiteouts {
				t.Errorf("%d whiteouts, want at most %d", wh, c.whiteouts)
			}
		})
	}
}

// TestImagesSparseBomb feeds a PAX sparse file whose holes expand to 1 GiB.
func TestImagesSparseBomb(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "hostile:sparse", fixture.NewImage(t, v1.Config{}, fixture.LayerFromTar(t, fixture.SparseBombTar(t, 1<<30, 0, 0))))
	s := imagesStore(t, imagecache.Options{Limits: unpack.Limits{MaxBytes: 16 << 20}})
	if _, err := s.Pull(context.Background(), ref, nil); !errors.Is(err, unpack.ErrHostile) {
		t.Fatalf("sparse bomb: %v, want ErrHostile", err)
	}
	imagesAssertClean(t, s)
}
