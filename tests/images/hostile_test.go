package images

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/tests/fixture"
)

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

func TestImagesHostileLayers(t *testing.T) {
	reg := fixture.StartRegistry(t)
	cases := fixture.HostileLayers()
	if len(cases) < 40 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
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
			for _, entries := range c.Layers(outside, probe) {
				layers = append(layers, fixture.LayerFromEntries(t, entries))
			}
			ref := reg.Push(t, fmt.Sprintf("hostile:c%d", i), fixture.NewImage(t, v1.Config{}, layers...))
			s, err := imagecache.Open(filepath.Join(storeRoot, "images"), imagecache.Options{Limits: c.Limits})
			if err != nil {
				t.Fatal(err)
			}
			img, err := s.Pull(context.Background(), ref, nil)
			switch {
			case c.WantErr && err == nil:
				t.Errorf("hostile layer accepted")
			case c.WantErr && !errors.Is(err, unpack.ErrHostile) && !errors.Is(err, unix.ELOOP):
				t.Errorf("refused, but not as hostile: %v", err)
			case !c.WantErr && err != nil:
				t.Errorf("layer should be neutralised, got %v", err)
			}
			if err == nil && c.Check != nil {
				c.Check(t, img.LayerDirs[len(img.LayerDirs)-1], outside)
			}
			if c.WantErr {
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
			if wh > c.Whiteouts {
				t.Errorf("%d whiteouts, want at most %d", wh, c.Whiteouts)
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
