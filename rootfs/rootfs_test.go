package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// TestPrepareManyLayers mounts an overlay of more layers than fit in one
// page of mount options, and checks that the topmost layer wins, that
// writes land in the writable layer and that Release leaves nothing.
func TestPrepareManyLayers(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	base := t.TempDir()
	var lowers []string
	long := strings.Repeat("x", 100)
	for i := 0; i < 120; i++ {
		dir := filepath.Join(base, fmt.Sprintf("%s-layer-%03d", long, i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "which"), []byte(fmt.Sprint(i)), 0o644)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("only-%d", i)), nil, 0o644)
		lowers = append(lowers, dir)
	}
	dir := filepath.Join(t.TempDir(), "sb")
	r, err := Prepare(dir, lowers, Options{DiskBytes: 8 << 20, Hostname: "h"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if got, _ := os.ReadFile(filepath.Join(r.Path, "which")); string(got) != "119" {
		t.Errorf("topmost layer should win, got %q", got)
	}
	for _, i := range []int{0, 60, 119} {
		if _, err := os.Stat(filepath.Join(r.Path, fmt.Sprintf("only-%d", i))); err != nil {
			t.Errorf("layer %d not visible: %v", i, err)
		}
	}
	if err := os.WriteFile(filepath.Join(r.Path, "new"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(lowers[119], "new")); err == nil {
		t.Error("a write reached a lower layer")
	}
	if got, _ := os.ReadFile(filepath.Join(r.Path, "etc", "hostname")); string(got) != "h\n" {
		t.Errorf("hostname file %q", got)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Release left %s", dir)
	}
}

// TestPrepareDiskCap checks that the writable layer is capped.
func TestPrepareDiskCap(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	lower := t.TempDir()
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), []string{lower}, Options{DiskBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	err = os.WriteFile(filepath.Join(r.Path, "big"), make([]byte, 4<<20), 0o644)
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("a 4 MiB write into a 2 MiB layer: %v", err)
	}
}

func TestPrepareErrors(t *testing.T) {
	if _, err := Prepare(filepath.Join(t.TempDir(), "a"), nil, Options{}); err == nil {
		t.Error("no layers accepted")
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Prepare(dir, []string{"/nonexistent"}, Options{}); err == nil {
		t.Error("missing layer accepted")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Error("a failed Prepare left its directory")
	}
}

// Cleanup finds every mount below the directory by walking it (not the
// host's mount table): stacked mounts, a mount inside a mount, a file bind
// mount, a mount below a plain directory, and never removes anything
// through a mount or a symlink.
func TestCleanupUnmountsEverythingBelow(t *testing.T) {
	roottest.Require(t, "it mounts tmpfs and binds")
	host := t.TempDir() // stands for host files a volume would expose
	keep := filepath.Join(host, "keep")
	if err := os.WriteFile(keep, []byte("host data"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sandbox")
	mkdir := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mount := func(src, dst, fstype string, flags uintptr) {
		t.Helper()
		if err := unix.Mount(src, dst, fstype, flags, ""); err != nil {
			t.Fatalf("mount %s on %s: %v", src, dst, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
	}
	stacked := mkdir(filepath.Join(dir, "stacked"))
	mount("tmpfs", stacked, "tmpfs", 0)
	mount("tmpfs", stacked, "tmpfs", 0)
	outer := mkdir(filepath.Join(dir, "outer"))
	mount("tmpfs", outer, "tmpfs", 0)
	inner := mkdir(filepath.Join(outer, "inner"))
	mount(host, inner, "", unix.MS_BIND)
	deep := mkdir(filepath.Join(dir, "a", "b", "volume"))
	mount(host, deep, "", unix.MS_BIND)
	file := filepath.Join(dir, "a", "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mount(keep, file, "", unix.MS_BIND)
	if err := os.Symlink(host, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	if err := Cleanup(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Cleanup: %v", dir, err)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "host data" {
		t.Fatalf("host file behind the mounts: %q, %v", data, err)
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(info), dir) {
		t.Fatalf("mounts left below %s:\n%s", dir, info)
	}
	if err := Cleanup(dir); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
}

// TestPrepareKeepsTheImagesWorkdir: a working directory the image has
// keeps its owner and mode (it is not made again, root's, in the writable
// layer); one it lacks is made.
func TestPrepareKeepsTheImagesWorkdir(t *testing.T) {
	roottest.Require(t, "it mounts an overlay and chowns")
	base := t.TempDir()
	lower, top := filepath.Join(base, "l0"), filepath.Join(base, "l1")
	for _, d := range []string{filepath.Join(lower, "workspace", "project"), filepath.Join(top, "srv")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(lower, "workspace"), 10001, 10002); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(lower, "workspace"), 0o750); err != nil {
		t.Fatal(err)
	}
	// /srv is the top layer's, /data a file there.
	os.WriteFile(filepath.Join(top, "data"), nil, 0o644)
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), []string{lower, top}, Options{DiskBytes: 8 << 20, Dirs: []string{"/workspace", "/new/wd", "srv"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(r.Path, "workspace"), &st); err != nil || st.Uid != 10001 || st.Gid != 10002 || st.Mode&0o777 != 0o750 {
		t.Errorf("the image's /workspace: uid %d gid %d mode %o (%v), want 10001 10002 750", st.Uid, st.Gid, st.Mode&0o777, err)
	}
	if _, err := os.Stat(filepath.Join(r.Path, "workspace", "project")); err != nil {
		t.Errorf("the image's /workspace/project: %v", err)
	}
	for _, d := range []string{"new/wd", "srv"} {
		if fi, err := os.Stat(filepath.Join(r.Path, d)); err != nil || !fi.IsDir() {
			t.Errorf("/%s: %v", d, err)
		}
	}
	if got, err := missingDirs([]string{lower, top}, []string{"/data", "/workspace/project", "/nope"}, true); err != nil || strings.Join(got, " ") != "/data /nope" {
		t.Errorf("missingDirs: %q, %v", got, err)
	}
}

// TestPrepareEtcInASeededLayer: a restore seeds the writable layer with
// what a sandbox left in its own. /etc/hostname, hosts and resolv.conf are
// written into it without following anything there: a FIFO, a symlink out
// of the root and a whiteout are replaced by regular files (the host file
// the symlink names is untouched, the FIFO does not block), and an /etc
// that is a symlink out of the root or a file there that is a directory is
// refused, with nothing written outside.
func TestPrepareEtcInASeededLayer(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	lower := t.TempDir()
	if err := os.MkdirAll(filepath.Join(lower, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir() // stands for the host's /etc
	hostFile := filepath.Join(host, "resolv.conf")
	if err := os.WriteFile(hostFile, []byte("host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{DiskBytes: 8 << 20, Hostname: "h", Hosts: "127.0.0.1 h\n", ResolvConf: "nameserver 10.0.0.1\n"}
	seeded := func(seed func(etc string) error) Options {
		o := o
		o.Seed = func(upper string) error { return seed(filepath.Join(upper, "etc")) }
		return o
	}
	good := seeded(func(etc string) error {
		return errors.Join(os.Mkdir(etc, 0o755),
			unix.Mkfifo(filepath.Join(etc, "hostname"), 0o644),
			os.Symlink(hostFile, filepath.Join(etc, "resolv.conf")),
			unix.Mknod(filepath.Join(etc, "hosts"), unix.S_IFCHR|0o600, 0)) // a whiteout
	})
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), []string{lower}, good)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"hostname": "h\n", "hosts": o.Hosts, "resolv.conf": o.ResolvConf} {
		p := filepath.Join(r.Path, "etc", name)
		fi, err := os.Lstat(p)
		got, _ := os.ReadFile(p)
		if err != nil || !fi.Mode().IsRegular() || string(got) != want {
			t.Errorf("/etc/%s: %v %v %q, want a regular file with %q", name, fi.Mode(), err, got, want)
		}
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	for what, o := range map[string]Options{
		"/etc a symlink out of the root": seeded(func(etc string) error { return os.Symlink(host, etc) }),
		"/etc/hosts a directory": seeded(func(etc string) error {
			return os.MkdirAll(filepath.Join(etc, "hosts", "x"), 0o755)
		}),
	} {
		dir := filepath.Join(t.TempDir(), "sb")
		if _, err := Prepare(dir, []string{lower}, o); err == nil {
			t.Errorf("%s: Prepare succeeded", what)
		} else if !strings.Contains(err.Error(), "writable layer") {
			t.Errorf("%s: error %q does not say where", what, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: a failed Prepare left %s", what, dir)
		}
	}
	entries, _ := os.ReadDir(host)
	if got, _ := os.ReadFile(hostFile); len(entries) != 1 || string(got) != "host's\n" {
		t.Errorf("the host directory was written through the layer: %d entries, resolv.conf %q", len(entries), got)
	}
}

// A restored sandbox's layer (Prepare's Seed) that has its working
// directory as a symlink or a file, as the sandbox left it before its
// checkpoint, is restored as it is: the working directory is not made
// over it, and the restore does not fail; one the layer lacks is made.
func TestPrepareKeepsASeedsWorkdir(t *testing.T) {
	roottest.Require(t, "it mounts an overlay")
	lower := t.TempDir()
	o := Options{DiskBytes: 8 << 20, Dirs: []string{"/work", "/file/x", "/made"}, Seed: func(upper string) error {
		return errors.Join(os.Symlink("/tmp", filepath.Join(upper, "work")), os.WriteFile(filepath.Join(upper, "file"), nil, 0o644))
	}}
	r, err := Prepare(filepath.Join(t.TempDir(), "sb"), []string{lower}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if target, err := os.Readlink(filepath.Join(r.Path, "work")); err != nil || target != "/tmp" {
		t.Errorf("/work: %q, %v; want the seed's symlink to /tmp", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(r.Path, "file")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("/file: %v; want the seed's file", err)
	}
	if fi, err := os.Lstat(filepath.Join(r.Path, "made")); err != nil || !fi.IsDir() {
		t.Errorf("/made: %v; want a directory", err)
	}
}

// TestMkdirThroughOverlayStickyTmpOnlyAtTheEnd: a directory made for a
// path named tmp is world-writable and sticky; a tmp in the middle of the
// path (/srv/tmp/app) is made like any other directory.
func TestMkdirThroughOverlayStickyTmpOnlyAtTheEnd(t *testing.T) {
	roottest.Require(t, "it chowns what it makes")
	root := t.TempDir()
	for _, p := range []string{"/srv/tmp/app", "/var/tmp"} {
		if err := mkdirThroughOverlay(root, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	for p, want := range map[string]os.FileMode{
		"srv": 0o755, "srv/tmp": 0o755, "srv/tmp/app": 0o755,
		"var": 0o755, "var/tmp": os.ModeSticky | 0o777,
	} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSticky); got != want {
			t.Errorf("/%s: mode %v, want %v", p, got, want)
		}
	}
}
