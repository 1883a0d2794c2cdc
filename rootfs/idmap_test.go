package rootfs

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/userns"
	"golang.org/x/sys/unix"
)

// TestPrepareIDMappedLayersMountNowhere prepares a root for a user
// namespace: the image's files show as the namespace's range, writes
// belong to its root, and the id-mapped layers are detached clones the
// overlay holds, mounted nowhere: below the sandbox's directory there are
// only the writable layer and the root (so teardown has nothing else to
// unmount), and Release leaves nothing.
func TestPrepareIDMappedLayersMountNowhere(t *testing.T) {
	r, ns := testUserNS(t, 4093)
	var lowers []string
	for i, owner := range []int{0, 1000} {
		dir := filepath.Join(t.TempDir(), "layer")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, []string{"by-root", "by-1000"}[i])
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, owner, owner); err != nil {
			t.Fatal(err)
		}
		lowers = append(lowers, dir)
	}
	dir := filepath.Join(t.TempDir(), "sb")
	root, err := Prepare(dir, lowers, Options{DiskBytes: 8 << 20, UserNS: &UserNS{NS: ns, HostID: r.HostID}})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Release()
	for name, want := range map[string]uint32{"by-root": r.HostID, "by-1000": r.HostID + 1000} {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(root.Path, name), &st); err != nil || st.Uid != want || st.Gid != want {
			t.Errorf("%s in the root: owner %d:%d (want %d), %v", name, st.Uid, st.Gid, want, err)
		}
	}
	if err := os.WriteFile(filepath.Join(root.Path, "new"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mountsBelow(t, dir); len(got) != 2 {
		t.Errorf("mounts below the sandbox's directory: %v; want only the writable layer and the root", got)
	}
	if err := root.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Release left %s", dir)
	}
	if got := mountsBelow(t, dir); len(got) != 0 {
		t.Errorf("mounts left after Release: %v", got)
	}
}

// testUserNS makes a user namespace of the default size at slot (far
// from the ones sandboxes take), closed when the test ends.
func testUserNS(t *testing.T, slot uint32) (userns.Range, *os.File) {
	t.Helper()
	roottest.Require(t, "it makes a user namespace and mounts an overlay")
	r := userns.Range{HostID: userns.DefaultBase + slot*userns.DefaultSize, Size: userns.DefaultSize}
	ns, err := userns.New(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return r, ns
}

// mountsBelow lists the mount points of this mount namespace at or below
// dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// TestPrepareKeepsTheParentsOfADir: a directory the image lacks is made
// under the image's own directories without changing their owners or
// modes (a user's 0700 home stays theirs), in the host's user namespace
// and in a private one; what is made is the sandbox's root's.
func TestPrepareKeepsTheParentsOfADir(t *testing.T) {
	r, ns := testUserNS(t, 4092)
	for _, private := range []bool{false, true} {
		lowers := layers(t, []string{"home/app/"})
		home := filepath.Join(lowers[0], "home", "app")
		if err := errors.Join(os.Chown(home, 1000, 1001), os.Chmod(home, 0o700)); err != nil {
			t.Fatal(err)
		}
		o := Options{DiskBytes: 8 << 20, Dirs: []string{"/home/app/project/src"}}
		base := uint32(0)
		if private {
			o.UserNS = &UserNS{NS: ns, HostID: r.HostID}
			base = r.HostID
		}
		root, err := Prepare(filepath.Join(t.TempDir(), "sb"), lowers, o)
		if err != nil {
			t.Fatal(err)
		}
		for d, want := range map[string][3]uint32{
			"home/app":             {base + 1000, base + 1001, 0o700},
			"home/app/project":     {base, base, 0o755},
			"home/app/project/src": {base, base, 0o755},
		} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(root.Path, d), &st); err != nil || [3]uint32{st.Uid, st.Gid, st.Mode & 0o7777} != want {
				t.Errorf("private %v: /%s is %d:%d %o (%v), want %d:%d %o", private, d, st.Uid, st.Gid, st.Mode&0o7777, err, want[0], want[1], want[2])
			}
		}
		if err := root.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
