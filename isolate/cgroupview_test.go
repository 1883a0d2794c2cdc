package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/roottest"
)

// TestMountCgroupView builds a sandbox's cgroup view on this host (in a
// mount namespace of the test's own): on a v1 or hybrid host a read-only
// tmpfs whose entries are read-only binds of the sandbox's directories,
// which cannot be written through; UnmountCgroupView leaves no mount.
func TestMountCgroupView(t *testing.T) {
	roottest.Require(t, "it mounts and creates cgroups")
	// The cgroup library's handle on /sys/fs/cgroup, kept for the life of
	// the process, is opened in the host's mount namespace, as sbx does
	// before a start from another namespace: one opened in the test's
	// namespace would lose its cgroup mounts with it, and the package's
	// later tests could not reach any cgroup.
	cgroup.OpenRootHandle()
	if err := cgroup.EnsureParent(cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	onThreadOfItsOwn(t, func(t *testing.T) {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Fatal(err)
		}
		id := "cgview-test"
		dir := filepath.Join(t.TempDir(), "cgroup")
		made, err := MountCgroupView(dir, id)
		defer func() { _ = cgroup.RemovePaths(cgroup.SandboxLeftovers(id)) }()
		if err != nil {
			t.Fatal(err)
		}
		if cgroup.DetectMode() == cgroup.ModeV2 {
			if made {
				t.Fatal("a view was made on a pure v2 host")
			}
			return
		}
		if !made {
			t.Fatal("no view made on a v1 or hybrid host")
		}
		mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range mounts {
			if !strings.Contains(","+m.Options+",", ",ro,") || !strings.Contains(m.Options, "nosuid") || !strings.Contains(m.Options, "noexec") {
				t.Errorf("%s is mounted %s, want ro,nosuid,nodev,noexec", m.Mountpoint, m.Options)
			}
			if m.Mountpoint != dir {
				names = append(names, filepath.Base(m.Mountpoint))
				if m.FSType != "cgroup" || m.Root != cgroup.SandboxPath(id) {
					t.Errorf("%s shows %s %s, want the sandbox's cgroup %s", m.Mountpoint, m.FSType, m.Root, cgroup.SandboxPath(id))
				}
			}
		}
		if len(names) == 0 || len(mounts) != len(names)+1 {
			t.Fatalf("view mounts %v", mounts)
		}
		t.Logf("view: %v", names)
		mem := filepath.Join(dir, "memory", "memory.limit_in_bytes")
		if _, err := os.Stat(mem); err != nil {
			t.Errorf("the memory limit is not in the view: %v", err)
		}
		if err := os.WriteFile(mem, []byte("1"), 0); !errors.Is(err, unix.EROFS) {
			t.Errorf("writing the limit through the view: %v, want EROFS", err)
		}
		if err := UnmountCgroupView(dir); err != nil {
			t.Fatal(err)
		}
		if left, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(dir)); len(left) > 0 {
			t.Errorf("mounts left after UnmountCgroupView: %v", left)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("view directory left: %v", err)
		}
	})
}

// WarmCgroups makes the directories the view shows (and nothing else:
// libcontainer makes the rest when it moves the init), so that
// MountCgroupView finds them made.
func TestWarmCgroupsMakesViewedDirs(t *testing.T) {
	roottest.Require(t, "it creates cgroups")
	if err := cgroup.EnsureParent(cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	id := "cgwarm-test"
	WarmCgroups(id)
	defer func() { _ = cgroup.RemovePaths(cgroup.SandboxLeftovers(id)) }()
	made := 0
	for _, mp := range cgroup.Mountpoints() {
		_, err := os.Stat(filepath.Join(mp, cgroup.SandboxPath(id)))
		switch {
		case pureV2(cgroup.Mountpoints()) || !viewed(mp):
			if err == nil {
				t.Errorf("%s: a cgroup the view does not show was made", mp)
			}
		case err != nil:
			t.Errorf("%s: the view's cgroup was not made: %v", mp, err)
		default:
			made++
		}
	}
	if !pureV2(cgroup.Mountpoints()) && made == 0 {
		t.Fatal("no cgroup made on a v1 or hybrid host")
	}
}
