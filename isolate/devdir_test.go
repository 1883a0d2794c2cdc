package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/roottest"
)

// TestMountDev makes a sandbox's /dev on the host side (in a mount
// namespace of the test's own), for the host's root and for a user
// namespace's: the nodes are the devices they name, usable, owned as
// asked; UnmountDev leaves nothing.
func TestMountDev(t *testing.T) {
	roottest.Require(t, "it mounts and makes device nodes")
	onThreadOfItsOwn(t, func(t *testing.T) {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatal(err)
		}
		for _, owner := range []int{-1, 100000} {
			dir := filepath.Join(t.TempDir(), "dev")
			if err := MountDev(dir, owner); err != nil {
				t.Fatal(err)
			}
			want := uint32(0)
			if owner >= 0 {
				want = uint32(owner)
			}
			for _, n := range devNodes {
				var st unix.Stat_t
				if err := unix.Stat(filepath.Join(dir, n.name), &st); err != nil {
					t.Fatal(err)
				}
				if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Mode&0o777 != 0o666 || unix.Major(st.Rdev) != n.major || unix.Minor(st.Rdev) != n.minor || st.Uid != want {
					t.Errorf("owner %d: %s is mode %o rdev %d:%d uid %d", owner, n.name, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Uid)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "null"), []byte("x"), 0); err != nil {
				t.Errorf("owner %d: writing null: %v", owner, err)
			}
			for _, l := range devLinks {
				if got, err := os.Readlink(filepath.Join(dir, l[1])); err != nil || got != l[0] {
					t.Errorf("owner %d: %s -> %q (%v), want %s", owner, l[1], got, err, l[0])
				}
			}
			for _, d := range []string{"pts", "shm", "mqueue"} {
				if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
					t.Errorf("owner %d: no %s directory: %v", owner, d, err)
				}
			}
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Flags&unix.ST_NOSUID == 0 {
				t.Errorf("owner %d: /dev is not a nosuid tmpfs: %+v %v", owner, st, err)
			}
			if err := UnmountDev(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("owner %d: %s left: %v", owner, dir, err)
			}
		}
	})
}
