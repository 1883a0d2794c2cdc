package rootfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// TestChanges writes, changes and deletes through a real overlay and
// checks that Changes reads the writable layer as docker diff would, never
// following the sandbox's symbolic links.
func TestChanges(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	bottom, top := t.TempDir(), t.TempDir()
	for _, d := range []string{"dir", "etc", "deep/er"} {
		if err := os.MkdirAll(filepath.Join(bottom, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "dir/b", "gone", "deep/er/x", "shadowed"} {
		if err := os.WriteFile(filepath.Join(bottom, f), []byte("lower"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The top layer deletes "shadowed" (a whiteout) and links "escape"
	// to the host's root.
	if err := makeWhiteout(filepath.Join(top, "shadowed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(top, "escape")); err != nil {
		t.Fatal(err)
	}
	lowers := []string{bottom, top}
	dir := filepath.Join(t.TempDir(), "sb")
	r, err := Prepare(dir, lowers, Options{DiskBytes: 8 << 20, Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	root := r.Path
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "a"), []byte("changed"), 0o644))
	must(os.WriteFile(filepath.Join(root, "dir/c"), []byte("new"), 0o644))
	must(os.Remove(filepath.Join(root, "gone")))
	must(os.MkdirAll(filepath.Join(root, "new/sub"), 0o755))
	must(os.WriteFile(filepath.Join(root, "shadowed"), []byte("again"), 0o644))
	// A path that exists on the host through the link, not in the image.
	must(os.Remove(filepath.Join(root, "escape")))
	must(os.MkdirAll(filepath.Join(root, "escape/etc"), 0o755))

	got, err := Changes(UpperDir(dir), lowers, func(rel string) bool { return rel == "etc/hostname" }, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Changed, "/a"},
		{Changed, "/dir"},
		{Added, "/dir/c"},
		{Changed, "/escape"},
		{Added, "/escape/etc"},
		{Deleted, "/gone"},
		{Added, "/new"},
		{Added, "/new/sub"},
		{Added, "/shadowed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n got %v\nwant %v", got, want)
	}
	if _, err := Changes(UpperDir(dir), lowers, nil, 3); err == nil {
		t.Error("no error past the cap on changes")
	}
}

// makeWhiteout makes an overlayfs whiteout, as an unpacked layer holds one.
func makeWhiteout(p string) error { return unix.Mknod(p, unix.S_IFCHR, 0) }
