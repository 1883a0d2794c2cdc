package rootfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// startInMountNS starts a process in a private mount namespace and a UTS
// namespace of its own (as a running sandbox's PID 1 is) and returns its
// pid and pidfd.
func startInMountNS(t *testing.T) (int, int) {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--uts", "--propagation", "private", "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// unshare execs sleep in the same process once the namespace is made.
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for range 500 {
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt"); err == nil && ns != self {
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); strings.HasSuffix(exe, "sleep") {
				break
			}
		}
		unixSleep()
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(pidfd) })
	return cmd.Process.Pid, pidfd
}

func unixSleep() { _ = unix.Nanosleep(&unix.Timespec{Nsec: 2e6}, nil) }

// TestMountLive: a volume (read-only and not) and a sized tmpfs made with
// the new mount API appear in the process's mount namespace at the
// mountpoints PrepareTargets made, with their flags, and never on the
// host; a mountpoint path through a symlink that leads out of the root
// stays inside it.
func TestMountLive(t *testing.T) {
	roottest.Require(t, "mount namespaces")
	pid, pidfd := startInMountNS(t)
	root := t.TempDir()                  // the "sandbox's" root, as seen from its namespace
	src, out := t.TempDir(), t.TempDir() // a host volume; a directory outside the root
	if err := os.WriteFile(filepath.Join(src, "hello"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hostile symlink in the root naming a host directory: inside the
	// root it means root+out, which exists there too.
	if err := os.Symlink(out, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, out), 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := []LiveMount{
		{Source: src, Target: "/data"},
		{Source: src, Target: "/ro/data", ReadOnly: true},
		{Target: "/scratch", SizeBytes: 4 << 20},
		{Target: "/escape/x"},
	}
	if err := PrepareTargets(root, mounts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a mountpoint followed a symlink out of the root: %v", err)
	}
	procRoot, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/root"+root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer procRoot.Close()
	if err := MountLive(pidfd, procRoot, -1, mounts); err != nil {
		t.Fatal(err)
	}
	// The host sees none of them.
	if got := mountsAt(t, root); len(got) != 0 {
		t.Fatalf("mounts on the host: %v", got)
	}
	in := func(args ...string) (string, error) {
		out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid), "-m", "--"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if got, err := in("cat", root+"/data/hello"); err != nil || got != "from the host" {
		t.Fatalf("volume in the namespace: %q, %v", got, err)
	}
	if got, err := in("touch", root+"/ro/data/new"); err == nil || !strings.Contains(got, "Read-only") {
		t.Fatalf("read-only volume accepted a write: %q, %v", got, err)
	}
	if _, err := in("touch", root+"/data/new"); err != nil {
		t.Fatalf("writable volume refused a write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err != nil {
		t.Fatalf("a write to the volume did not reach the host directory: %v", err)
	}
	mi, err := in("cat", "/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{root + "/data ", root + "/ro/data ", root + "/scratch ", root + out + "/x "} {
		line := ""
		for _, l := range strings.Split(mi, "\n") {
			if strings.Contains(l, " "+want) {
				line = l
			}
		}
		if line == "" {
			t.Fatalf("no mount at %s in the namespace:\n%s", want, mi)
		}
		if !strings.Contains(line, "nosuid") || !strings.Contains(line, "nodev") {
			t.Errorf("%s: not nosuid,nodev: %s", want, line)
		}
	}
	if got, err := in("df", "-k", root+"/scratch"); err != nil || !strings.Contains(got, "4096") {
		t.Errorf("tmpfs size: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(out, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a mount followed a symlink out of the root: %v", err)
	}
}

// TestMoveIntoSetsHostname: MoveInto joins the process's UTS namespace
// with its mount namespace and sets the name there; the host's stays as
// it was, and a name longer than 64 bytes is refused.
func TestMoveIntoSetsHostname(t *testing.T) {
	roottest.Require(t, "mount and UTS namespaces")
	host, _ := os.Hostname()
	pid, pidfd := startInMountNS(t)
	root, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	d, err := DetachMounts(nil, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := OnOwnThread(func() error { return d.MoveInto(pidfd, root, "claimed-host") }); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-u", "hostname").Output()
	if err != nil || strings.TrimSpace(string(out)) != "claimed-host" {
		t.Fatalf("hostname in the namespace: %q, %v", out, err)
	}
	if now, _ := os.Hostname(); now != host {
		t.Fatalf("the host's hostname changed: %q -> %q", host, now)
	}
	if err := OnOwnThread(func() error { return d.MoveInto(pidfd, root, strings.Repeat("x", 65)) }); err == nil {
		t.Fatal("a 65-byte hostname was accepted")
	}
}

// TestRewriteEtc: the files are replaced in place (same inode), inside
// the root even when /etc is a symlink pointing out of it, and a FIFO
// there is refused rather than blocked on.
func TestRewriteEtc(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(root, "etc", "hosts"), []byte("old\n"), 0o644))
	var before unix.Stat_t
	must(unix.Stat(filepath.Join(root, "etc", "hosts"), &before))
	must(RewriteEtc(root, Options{Hostname: "h1", Hosts: "127.0.0.1 h1\n", ResolvConf: "nameserver 10.0.0.1\n"}))
	var after unix.Stat_t
	must(unix.Stat(filepath.Join(root, "etc", "hosts"), &after))
	if before.Ino != after.Ino {
		t.Fatal("/etc/hosts was replaced, not rewritten")
	}
	for name, want := range map[string]string{"hostname": "h1\n", "hosts": "127.0.0.1 h1\n", "resolv.conf": "nameserver 10.0.0.1\n"} {
		if got, _ := os.ReadFile(filepath.Join(root, "etc", name)); string(got) != want {
			t.Errorf("/etc/%s = %q, want %q", name, got, want)
		}
	}
	// /etc a symlink to a host directory: resolved inside the root.
	root2 := t.TempDir()
	must(os.Symlink(out, filepath.Join(root2, "etc")))
	must(os.MkdirAll(filepath.Join(root2, out), 0o755))
	must(RewriteEtc(root2, Options{ResolvConf: "nameserver 10.0.0.2\n"}))
	if _, err := os.Stat(filepath.Join(out, "resolv.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("RewriteEtc wrote through a symlink out of the root")
	}
	must(unix.Mkfifo(filepath.Join(root, "etc", "resolv.conf.fifo"), 0o644))
	must(os.Remove(filepath.Join(root, "etc", "resolv.conf")))
	must(os.Rename(filepath.Join(root, "etc", "resolv.conf.fifo"), filepath.Join(root, "etc", "resolv.conf")))
	if err := RewriteEtc(root, Options{ResolvConf: "x\n"}); err == nil {
		t.Fatal("wrote to a FIFO")
	}
}

// TestDirInRoot: a directory is opened, or made (its last component with
// one mkdirat, deeper ones through pathrs), inside the root: a symlink to
// a host directory or to /, as a parent, never leads a directory out of
// it.
func TestDirInRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(root, "up")); err != nil {
		t.Fatal(err)
	}
	rootDir, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rootDir.Close()
	for _, p := range []string{"/data", "/data", "/deep/er/dir", "/up/via-root", "../../dots"} {
		f, err := dirInRoot(rootDir, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		f.Close()
	}
	// A dangling symlink (its target is not in the root): refused, or
	// made inside; never outside.
	if f, err := dirInRoot(rootDir, "/escape/made"); err == nil {
		f.Close()
	}
	for _, p := range []string{"data", "deep/er/dir", "via-root", "dots"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s not made inside the root: %v", p, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a directory was made outside the root through a symlink: %v", entries)
	}
	if fi, err := os.Lstat(filepath.Join(root, "escape")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v", err)
	}
}

// TestRewriteEtcHostileFiles: a sandbox's /etc/hosts that is a FIFO with
// a reader, a symlink to a device or out of the root, a bind of a host
// file, or an /etc that is a mount of its own, is refused without the
// target being opened for writing, and nothing outside the root changes.
func TestRewriteEtcHostileFiles(t *testing.T) {
	roottest.Require(t, "it mounts in a mount namespace of its own")
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Hosts: "127.0.0.1 h1\n"}
	newRoot := func(t *testing.T) string {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		return root
	}
	t.Run("fifo with a reader", func(t *testing.T) {
		root := newRoot(t)
		fifo := filepath.Join(root, "etc", "hosts")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(r)
		if err := RewriteEtc(root, o); err == nil {
			t.Fatal("RewriteEtc accepted a FIFO as /etc/hosts")
		}
		// A writer that opened and closed the FIFO leaves its reader hung up.
		fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 0); err != nil {
			t.Fatal(err)
		}
		if fds[0].Revents&unix.POLLHUP != 0 {
			t.Fatal("RewriteEtc opened the FIFO for writing before refusing it")
		}
	})
	for name, target := range map[string]string{"symlink to a device": "/dev/null", "symlink out of the root": outside} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			if err := os.Symlink(target, filepath.Join(root, "etc", "hosts")); err != nil {
				t.Fatal(err)
			}
			if err := RewriteEtc(root, o); err == nil {
				t.Fatalf("RewriteEtc accepted /etc/hosts -> %s", target)
			}
			if fi, err := os.Lstat(filepath.Join(root, "etc", "hosts")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the symlink was replaced: %v", err)
			}
		})
	}
	// The mounts are made on a thread of their own in a private mount
	// namespace, never unlocked, so the thread (and its mounts) ends. It
	// is never the process's main thread (onLockedThread): Go cannot end
	// that one, which would stay in the private namespace, and the later
	// tests' /proc/self/mountinfo would show that namespace, not the
	// host's.
	inMountNS := func(t *testing.T, fn func() error) {
		t.Helper()
		err := onLockedThread(func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return err
			}
			return fn()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Run("bind of a host file", func(t *testing.T) {
		root := newRoot(t)
		hosts := filepath.Join(root, "etc", "hosts")
		if err := os.WriteFile(hosts, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		inMountNS(t, func() error {
			if err := unix.Mount(outside, hosts, "", unix.MS_BIND, ""); err != nil {
				return err
			}
			if err := RewriteEtc(root, o); err == nil {
				return errors.New("RewriteEtc wrote through a bind mount at /etc/hosts")
			}
			return nil
		})
	})
	t.Run("etc a mount of its own", func(t *testing.T) {
		root := newRoot(t)
		etc := filepath.Join(root, "etc")
		inMountNS(t, func() error {
			if err := unix.Mount("tmpfs", etc, "tmpfs", 0, ""); err != nil {
				return err
			}
			if err := RewriteEtc(root, o); err == nil {
				return errors.New("RewriteEtc wrote into a mount at /etc")
			}
			if entries, _ := os.ReadDir(etc); len(entries) != 0 {
				return errors.New("RewriteEtc made files in a mount at /etc")
			}
			return nil
		})
	})
	if got, _ := os.ReadFile(outside); string(got) != "host\n" {
		t.Fatalf("the host file was written: %q", got)
	}
}
