package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// threadNamespaces are the mount and UTS namespaces of the calling thread.
func threadNamespaces() (string, string) {
	mnt, _ := os.Readlink("/proc/thread-self/ns/mnt")
	uts, _ := os.Readlink("/proc/thread-self/ns/uts")
	return mnt, uts
}

// TestVisitGoesBackToTheHost: a visit that joins a kept mount namespace
// and then a process's mount and UTS namespaces (as a claim's does) runs
// on the kept thread, sees the kept namespace's mounts, sets the
// process's hostname, and leaves the thread in the host's namespaces: the
// next visit, without a namespace, runs on the same thread and sees the
// host's namespaces and hostname. A visit that panics is an error and
// ends the thread; the next visit gets a new one.
func TestVisitGoesBackToTheHost(t *testing.T) {
	roottest.Require(t, "mount and UTS namespaces")
	hostMnt, hostUTS := threadNamespaces()
	host, _ := os.Hostname()
	n := NewNamespaces(t.TempDir())
	mark := filepath.Join(t.TempDir(), "mark")
	if err := os.Mkdir(mark, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := n.Create("kept", func() error { return unix.Mount("tmpfs", mark, "tmpfs", 0, "") }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Remove("kept") })
	_, pidfd := startInMountNS(t)

	var tid int
	var inKept bool
	err := n.StartVisit("kept", func() error {
		tid = unix.Gettid()
		var st unix.Statfs_t
		inKept = unix.Statfs(mark, &st) == nil && st.Type == unix.TMPFS_MAGIC
		if err := unix.Setns(pidfd, unix.CLONE_NEWNS|unix.CLONE_NEWUTS); err != nil {
			return err
		}
		return unix.Sethostname([]byte("visited"))
	})()
	if err != nil || !inKept {
		t.Fatalf("visit of the kept namespace: %v (saw its mount: %v)", err, inKept)
	}
	if now, _ := os.Hostname(); now != host {
		t.Fatalf("the host's hostname changed: %q -> %q", host, now)
	}
	var again int
	var mnt, uts, name string
	if err := VisitOnThread("", func() error {
		again, name = unix.Gettid(), hostnameOf()
		mnt, uts = threadNamespaces()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if again != tid || mnt != hostMnt || uts != hostUTS || name != host {
		t.Fatalf("next visit: thread %d (first %d), namespaces %s %s (host's %s %s), hostname %q", again, tid, mnt, uts, hostMnt, hostUTS, name)
	}
	if err := VisitOnThread("", func() error { panic("boom") }); err == nil {
		t.Fatal("a panicking visit returned no error")
	}
	if err := VisitOnThread("", func() error { again = unix.Gettid(); return errors.New("fine") }); err == nil || again == tid {
		t.Fatalf("visit after a panic: %v on thread %d (the ended one was %d)", err, again, tid)
	}
	if err := n.StartVisit("missing", func() error { return nil })(); err == nil {
		t.Fatal("a visit of a namespace never kept succeeded")
	}
}

func hostnameOf() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Nodename[:])
}

// TestVisitThatCannotGoBackEndsTheThread: a visit that leaves the kept
// thread in another mount namespace and unable to go back (here: it
// dropped CAP_SYS_ADMIN, which setns needs) fails, and its thread is
// never used again: the next visit runs on another thread, in the host's
// namespaces with the host's capabilities.
func TestVisitThatCannotGoBackEndsTheThread(t *testing.T) {
	roottest.Require(t, "mount namespaces")
	hostMnt, hostUTS := threadNamespaces()
	_, pidfd := startInMountNS(t)
	var first int
	if err := VisitOnThread("", func() error { first = unix.Gettid(); return nil }); err != nil {
		t.Fatal(err)
	}
	var stuck int
	err := VisitOnThread("", func() error {
		stuck = unix.Gettid()
		if err := unix.Setns(pidfd, unix.CLONE_NEWNS); err != nil {
			return err
		}
		return dropEffectiveCap(unix.CAP_SYS_ADMIN)
	})
	if err == nil {
		t.Fatal("a visit that could not go back to the host's mount namespace returned no error")
	}
	if stuck != first {
		t.Fatalf("the visit ran on thread %d, not the kept one (%d)", stuck, first)
	}
	var next int
	var mnt, uts string
	var admin bool
	if err := VisitOnThread("", func() error {
		next = unix.Gettid()
		mnt, uts = threadNamespaces()
		admin = hasEffectiveCap(unix.CAP_SYS_ADMIN)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next == stuck || mnt != hostMnt || uts != hostUTS || !admin {
		t.Fatalf("next visit: thread %d (the stuck one %d), namespaces %s %s (host's %s %s), CAP_SYS_ADMIN %v",
			next, stuck, mnt, uts, hostMnt, hostUTS, admin)
	}
}

// TestVisitThatDropsACapabilityEndsTheThread: a visit that gets back to
// the host's namespaces but leaves the kept thread without a capability
// (one that going back does not need: CAP_NET_ADMIN) fails, and its thread is never used again: the next visit runs on
// another thread, with the host's capabilities.
func TestVisitThatDropsACapabilityEndsTheThread(t *testing.T) {
	roottest.Require(t, "it drops a capability root has")
	var first int
	if err := VisitOnThread("", func() error { first = unix.Gettid(); return nil }); err != nil {
		t.Fatal(err)
	}
	var dropped int
	err := VisitOnThread("", func() error {
		dropped = unix.Gettid()
		return dropEffectiveCap(unix.CAP_NET_ADMIN)
	})
	if err == nil || !strings.Contains(err.Error(), "capabilities") {
		t.Fatalf("a visit that dropped CAP_NET_ADMIN: %v, want an error naming capabilities", err)
	}
	if dropped != first {
		t.Fatalf("the visit ran on thread %d, not the kept one (%d)", dropped, first)
	}
	var next int
	var netAdmin bool
	if err := VisitOnThread("", func() error {
		next, netAdmin = unix.Gettid(), hasEffectiveCap(unix.CAP_NET_ADMIN)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next == dropped || !netAdmin {
		t.Fatalf("next visit: thread %d (the one that dropped it %d), CAP_NET_ADMIN %v", next, dropped, netAdmin)
	}
	// A visit that drops one and gives it back keeps the thread.
	if err := VisitOnThread("", func() error {
		if err := dropEffectiveCap(unix.CAP_NET_ADMIN); err != nil {
			return err
		}
		return raiseEffectiveCap(unix.CAP_NET_ADMIN)
	}); err != nil {
		t.Fatalf("a visit that gave back what it dropped: %v", err)
	}
	var again int
	if err := VisitOnThread("", func() error { again = unix.Gettid(); return nil }); err != nil || again != next {
		t.Fatalf("after a visit that gave back what it dropped: thread %d, want the kept %d (%v)", again, next, err)
	}
}

// raiseEffectiveCap puts capability c (permitted) back into the calling
// thread's effective set.
func raiseEffectiveCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[c/32].Effective |= 1 << (c % 32)
	return unix.Capset(&hdr, &data[0])
}

// dropEffectiveCap drops capability c from the calling thread's effective
// set.
func dropEffectiveCap(c int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[c/32].Effective &^= 1 << (c % 32)
	return unix.Capset(&hdr, &data[0])
}

func hasEffectiveCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capget(&hdr, &data[0]) == nil && data[c/32].Effective&(1<<(c%32)) != 0
}

// TestVisitLeavingAnotherNamespaceEndsTheThread: a visit that leaves the
// kept thread in a namespace other than mount and UTS (network, IPC,
// cgroup, its children's PID namespace) fails, and its thread is never
// used again: the next visit runs on another thread, in the host's
// namespaces.
func TestVisitLeavingAnotherNamespaceEndsTheThread(t *testing.T) {
	roottest.Require(t, "it unshares namespaces")
	for _, ns := range []struct {
		name string
		flag int
	}{{"net", unix.CLONE_NEWNET}, {"ipc", unix.CLONE_NEWIPC}, {"cgroup", unix.CLONE_NEWCGROUP}, {"pid_for_children", unix.CLONE_NEWPID}} {
		t.Run(ns.name, func(t *testing.T) {
			path := "/proc/thread-self/ns/" + ns.name
			host, err := os.Readlink(path)
			if err != nil {
				t.Fatal(err)
			}
			var first int
			if err := VisitOnThread("", func() error { first = unix.Gettid(); return nil }); err != nil {
				t.Fatal(err)
			}
			var left int
			err = VisitOnThread("", func() error { left = unix.Gettid(); return unix.Unshare(ns.flag) })
			if err == nil || !strings.Contains(err.Error(), ns.name) {
				t.Fatalf("a visit that left the %s namespace: %v, want an error naming it", ns.name, err)
			}
			if left != first {
				t.Fatalf("the visit ran on thread %d, not the kept one (%d)", left, first)
			}
			var next int
			var now string
			if err := VisitOnThread("", func() error {
				next = unix.Gettid()
				now, err = os.Readlink(path)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if next == left || now != host {
				t.Fatalf("next visit: thread %d (the one left %d), %s namespace %s (host's %s)", next, left, ns.name, now, host)
			}
		})
	}
}
