package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// A lower layer's symlink that a higher layer hides under a directory is
// never followed on the host: the file it names outside the layers is not
// taken for a file on the working directory's path.
func TestFileOnPathFollowsNoHostSymlink(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "secret"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	low, high := t.TempDir(), t.TempDir()
	if err := os.Symlink(host, filepath.Join(low, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(high, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := FileOnPath([]string{low, high}, "/a/secret/x"); f != "" || err != nil {
		t.Fatalf("FileOnPath = %q, %v: it followed the lower layer's symlink to the host", f, err)
	}
	// The image's own files are still found, through its own symlinks.
	if err := os.WriteFile(filepath.Join(high, "a", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/a", filepath.Join(high, "link")); err != nil {
		t.Fatal(err)
	}
	if f, err := FileOnPath([]string{low, high}, "/link/file/x"); f != "/a/file" || err != nil {
		t.Fatalf("FileOnPath = %q, %v; want /a/file", f, err)
	}
}

// layers makes image layers (lowest first) in a temporary directory, each
// from a list of entries: "d/" a directory, "f" a file, "l->target" a
// symlink, "w" a whiteout.
func layers(t *testing.T, specs ...[]string) []string {
	t.Helper()
	var out []string
	for _, spec := range specs {
		dir := t.TempDir()
		for _, e := range spec {
			var err error
			switch name, target, link := strings.Cut(e, "->"); {
			case link:
				err = os.Symlink(target, filepath.Join(dir, name))
			case name[len(name)-1] == '/':
				err = os.MkdirAll(filepath.Join(dir, name), 0o755)
			default:
				err = os.WriteFile(filepath.Join(dir, name), nil, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, dir)
	}
	return out
}

// A directory the image has only through a symlink on the host's side is
// missing: the lower layer's symlink out of the layers, hidden under a
// higher layer's directory or not, is never followed on the host.
func TestMissingDirsFollowsNoHostSymlink(t *testing.T) {
	host := t.TempDir()
	if err := os.Mkdir(filepath.Join(host, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	lowers := layers(t, []string{"a->" + host, "b->" + host}, []string{"a/"})
	got, err := missingDirs(lowers, []string{"/a/x", "/b/x"}, true)
	if err != nil {
		t.Fatal(err)
	}
	// /b names the path of the host directory inside the sandbox, where
	// the directory is made.
	if want := []string{"/a/x", host + "/x"}; !slices.Equal(got, want) {
		t.Fatalf("missingDirs = %q, want %q: a host directory was taken for the image's", got, want)
	}
}

// A directory reached through a symlink to a directory (merged-usr's /bin
// -> usr/bin) is the image's, and one missing under it is made where the
// symlink points, not over the symlink.
func TestMissingDirsThroughASymlink(t *testing.T) {
	lowers := layers(t, []string{"usr/bin/", "usr/lib/", "bin->usr/bin", "lib->/usr/lib"}, []string{"usr/share/", "lib64->../usr/lib/../share"})
	got, err := missingDirs(lowers, []string{"/bin", "/bin/tool/x", "/lib/../bin", "lib64", "/lib64/y", "/nope"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/usr/bin/tool/x", "/usr/share/y", "/nope"}; !slices.Equal(got, want) {
		t.Fatalf("missingDirs = %q, want %q", got, want)
	}
}

// The merged view is the overlay's: a whiteout or a non-directory in a
// higher layer hides what the lower ones have under its path, and so does
// an opaque directory; a file is kept as it is (the caller refuses it
// first). The overlay, mounted, agrees.
func TestMissingDirsMergesAsTheOverlay(t *testing.T) {
	roottest.Require(t, "it makes whiteouts and trusted xattrs and mounts an overlay")
	lowers := layers(t, []string{"w/x/", "f/x/", "d/x/", "o/x/", "file"}, []string{"f", "d/", "o/"}, []string{"d/y/"})
	if err := unix.Mknod(filepath.Join(lowers[1], "w"), unix.S_IFCHR|0o600, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(lowers[1], "o"), opaqueXattr, []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	dirs := []string{"/w/x", "/f/x", "/d/x", "/d/y", "/o/x", "/o", "/file"}
	got, err := missingDirs(lowers, dirs, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/w/x", "/f/x", "/o/x", "/file"}; !slices.Equal(got, want) {
		t.Fatalf("missingDirs = %q, want %q", got, want)
	}
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), lowers, Options{DiskBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for _, d := range dirs {
		fi, err := os.Lstat(filepath.Join(r.Path, d))
		if isDir := err == nil && fi.IsDir(); isDir == slices.Contains(got, d) {
			t.Errorf("the overlay has %s a directory: %v, missingDirs disagrees", d, isDir)
		}
	}
}

// A working directory under merged-usr's /bin is made in /usr/bin: /bin
// stays the image's symlink in the mounted root.
func TestPrepareMakesADirThroughASymlink(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	lowers := layers(t, []string{"usr/bin/", "bin->usr/bin"})
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), lowers, Options{DiskBytes: 8 << 20, Dirs: []string{"/bin/tool"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if target, err := os.Readlink(filepath.Join(r.Path, "bin")); err != nil || target != "usr/bin" {
		t.Errorf("/bin: %q, %v; want the image's symlink to usr/bin", target, err)
	}
	if fi, err := os.Stat(filepath.Join(r.Path, "usr/bin/tool")); err != nil || !fi.IsDir() {
		t.Errorf("/usr/bin/tool: %v, want a directory", err)
	}
}

// sbx's own mount points (MountDirs, /.sbx) are directories of the
// writable layer where the image has a symlink: the image cannot send
// sbx's mounts elsewhere in the root.
func TestPrepareMountDirsHideTheImagesSymlinks(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	lowers := layers(t, []string{"etc/", "usr/bin/", ".sbx->/etc", "bin->usr/bin"})
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), lowers, Options{DiskBytes: 8 << 20, MountDirs: []string{"/.sbx", "/bin/m"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for _, d := range []string{"/.sbx", "/bin"} {
		if fi, err := os.Lstat(filepath.Join(r.Path, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v, %v; want a directory hiding the image's symlink", d, fi.Mode(), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(r.Path, "usr/bin/m")); err == nil {
		t.Error("/usr/bin/m was made: a mount point followed the image's symlink")
	}
}

// An image's own /.sbx directory is hidden: sbx's mount point shows none
// of its entries (a symlink where sbx binds its executor among them),
// whose parent the image has as a directory.
func TestPrepareMountDirsHideTheImagesEntries(t *testing.T) {
	roottest.Require(t, "it sets trusted xattrs and mounts an overlay")
	lowers := layers(t, []string{"bin/", "bin/sh", ".sbx/", ".sbx/executor->/bin/sh", ".sbx/run/", ".sbx/junk", "opt/m/", "opt/m/x"})
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), lowers, Options{DiskBytes: 8 << 20, MountDirs: []string{"/.sbx", "/opt/m"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	for _, d := range []string{"/.sbx", "/opt/m"} {
		ents, err := os.ReadDir(filepath.Join(r.Path, d))
		if err != nil || len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s in the root: %q, %v; want an empty directory", d, names, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(r.Path, "bin/sh")); err != nil {
		t.Errorf("the image's /bin/sh: %v", err)
	}
}

// A few symlinks whose targets each add thousands of missing components
// lead to a path far longer than PATH_MAX: the working directory is
// refused at once (ENAMETOOLONG), and no one of the tens of thousands of
// nested directories it names is made.
func TestLongSymlinkChainIsRefused(t *testing.T) {
	var spec []string
	deep := strings.Repeat("a/", 1000)
	for i := 0; i < maxSymlinkHops; i++ {
		spec = append(spec, fmt.Sprintf("s%d->s%d/%s", i, i+1, deep))
	}
	lowers := layers(t, spec)
	if f, err := FileOnPath(lowers, "/s0/x"); !errors.Is(err, unix.ENAMETOOLONG) {
		t.Errorf("FileOnPath = %q, %v; want ENAMETOOLONG", f, err)
	}
	if got, err := missingDirs(lowers, []string{"/s0/x"}, true); !errors.Is(err, unix.ENAMETOOLONG) {
		t.Errorf("missingDirs = %.80q, %v; want ENAMETOOLONG", got, err)
	}
	roottest.Require(t, "it mounts an overlay")
	dir := filepath.Join(t.TempDir(), "sb")
	if r, err := Prepare(dir, lowers, Options{DiskBytes: 8 << 20, Dirs: []string{"/s0/x"}}); !errors.Is(err, unix.ENAMETOOLONG) {
		if err == nil {
			r.Release()
		}
		t.Fatalf("Prepare: %v; want ENAMETOOLONG", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("Prepare left %s", dir)
	}
	// Within the bound, a chain still leads where the kernel goes.
	if got, err := missingDirs(lowers, []string{"/s38/x"}, true); err != nil || len(got) != 1 || !strings.HasPrefix(got[0], "/s40/a/a/") {
		t.Errorf("missingDirs = %.80q, %v; want a path under /s40/a/a/", got, err)
	}
}
