package rootfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// mountsAt lists this (the host's) mount namespace's mount points at or
// below dir.
func mountsAt(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestNamespacesKeepMountsOffTheHost: mounts made in Create's namespace
// are not on the host, a process started there sees them, Enter finds them
// again from another thread, the host holds one mount per namespace (its
// pin), which a new mount namespace does not copy, and after Remove
// nothing is left.
func TestNamespacesKeepMountsOffTheHost(t *testing.T) {
	roottest.Require(t, "mount namespaces")
	base := t.TempDir()
	ns := NewNamespaces(filepath.Join(base, "mntns"))
	for _, name := range []string{"a", "b"} {
		m := filepath.Join(base, name)
		if err := os.Mkdir(m, 0o700); err != nil {
			t.Fatal(err)
		}
		err := ns.Create(name, func() error {
			if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=1m"); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(m, "f"), []byte(name), 0o600); err != nil {
				return err
			}
			// A child started from this thread is in this namespace.
			out, err := exec.Command("cat", filepath.Join(m, "f")).Output()
			if err != nil || string(out) != name {
				t.Errorf("child of the creating thread: %q, %v", out, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(m, "f")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's file is visible on the host: %v", name, err)
		}
	}
	pins := []string{filepath.Join(base, "mntns", "a"), filepath.Join(base, "mntns", "b")}
	if got := mountsAt(t, base); strings.Join(got, " ") != strings.Join(pins, " ") {
		t.Errorf("host mounts = %q, want the pins %q", got, pins)
	}
	// A new mount namespace (a container's) copies none of them.
	cmd := exec.Command("cat", "/proc/self/mountinfo")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), base) {
		t.Errorf("a new mount namespace copied the pins:\n%s", out)
	}
	for _, name := range []string{"a", "b"} {
		var got []byte
		err := ns.Enter(name, func() error {
			var err error
			got, err = os.ReadFile(filepath.Join(base, name, "f"))
			return err
		})
		if err != nil || string(got) != name {
			t.Errorf("Enter(%s): %q, %v", name, got, err)
		}
		if !ns.Has(name) {
			t.Errorf("Has(%s) = false", name)
		}
	}
	if err := ns.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Enter("a", func() error { return nil }); err == nil {
		t.Error("Enter of a removed namespace succeeded")
	}
	if err := ns.Enter("b", func() error { return nil }); err != nil {
		t.Errorf("Enter(b) after removing a: %v", err)
	}
	if got := mountsAt(t, base); len(got) != 1 || got[0] != pins[1] {
		t.Errorf("host mounts with one namespace kept = %q, want %s", got, pins[1])
	}
	if err := ns.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if err := ns.Remove("b"); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if got := mountsAt(t, base); len(got) != 0 {
		t.Errorf("host mounts after the last Remove = %q", got)
	}
	if names, _ := os.ReadDir(filepath.Join(base, "mntns")); len(names) != 0 {
		t.Errorf("pin files left: %v", names)
	}
}

// TestNamespacesCreateFails: when fn fails nothing is kept, and bad names
// are refused.
func TestNamespacesCreateFails(t *testing.T) {
	roottest.Require(t, "mount namespaces")
	base := t.TempDir()
	ns := NewNamespaces(filepath.Join(base, "mntns"))
	boom := errors.New("boom")
	if err := ns.Create("x", func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Create = %v, want fn's error", err)
	}
	if ns.Has("x") {
		t.Error("a failed Create kept its namespace")
	}
	if got := mountsAt(t, base); len(got) != 0 {
		t.Errorf("host mounts after a failed Create = %q", got)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if err := ns.Create(bad, func() error { return nil }); err == nil {
			t.Errorf("Create(%q) succeeded", bad)
		}
	}
}

// TestNamespacesEnterKeepsCallersView: fn in Enter resolves relative paths
// from the caller's working directory (not the namespace's root), and a
// panic or runtime.Goexit in fn comes back as an error instead of ending
// the process or hanging the caller.
func TestNamespacesEnterKeepsCallersView(t *testing.T) {
	roottest.Require(t, "mount namespaces")
	base := t.TempDir()
	ns := NewNamespaces(filepath.Join(base, "mntns"))
	if err := ns.Create("w", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Remove("w") })
	if err := os.WriteFile(filepath.Join(base, "prof.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(old) })
	if err := ns.Enter("w", func() error { _, err := os.Stat("prof.json"); return err }); err != nil {
		t.Errorf("a relative path in Enter: %v", err)
	}
	if err := ns.Enter("w", func() error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic in Enter's fn: %v", err)
	}
	if err := ns.Enter("w", func() error { runtime.Goexit(); return nil }); err == nil {
		t.Error("runtime.Goexit in Enter's fn returned no error")
	}
	if err := ns.Enter("w", func() error { return nil }); err != nil {
		t.Errorf("Enter after a panic: %v", err)
	}
}
