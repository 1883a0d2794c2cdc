package rootfs

import (
	"bufio"
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
	roottest.Require(t, "it makes a user namespace and mounts an overlay")
	r := userns.Range{HostID: userns.DefaultBase + 4093*userns.DefaultSize, Size: userns.DefaultSize}
	ns, err := userns.New(r)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
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
