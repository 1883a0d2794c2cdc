package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\napp:x:1001:\nextra:x:2000:app\n"), 0o644)
	cases := []struct {
		spec string
		want User
	}{
		{"", User{UID: 0, GID: 0, Home: "/root"}},
		{"root", User{UID: 0, GID: 0, Home: "/root"}},
		{"app", User{UID: 1000, GID: 1001, AdditionalGroups: []int{2000}, Home: "/home/app"}},
		{"1000", User{UID: 1000, GID: 1001, AdditionalGroups: []int{2000}, Home: "/home/app"}},
		{"app:root", User{UID: 1000, GID: 0, Home: "/home/app"}},
		{"4242:4343", User{UID: 4242, GID: 4343, Home: "/"}},
	}
	for _, c := range cases {
		got, err := LookupUser(root, c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		if got.UID != c.want.UID || got.GID != c.want.GID || got.Home != c.want.Home || !slices.Equal(got.AdditionalGroups, c.want.AdditionalGroups) {
			t.Errorf("%q: got %+v want %+v", c.spec, got, c.want)
		}
	}
	if _, err := LookupUser(root, "nobody-here"); err == nil {
		t.Error("unknown user name resolved")
	}
	// /etc/passwd as a symlink out of the root resolves inside it.
	evil := t.TempDir()
	os.MkdirAll(filepath.Join(evil, "etc"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(evil, "etc/passwd"))
	if _, err := LookupUser(evil, "root"); err == nil {
		t.Error("a symlinked /etc/passwd was read from the host")
	}
}

// TestLookupUserHostileFiles: /etc/passwd and /etc/group as a FIFO (whose
// blocking open never returns without a writer) or a directory are read as
// absent: numeric users resolve, names do not, and nothing waits.
func TestLookupUserHostileFiles(t *testing.T) {
	for _, kind := range []string{"fifo", "dir"} {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "etc"), 0o755)
		for _, f := range []string{"etc/passwd", "etc/group"} {
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(filepath.Join(root, f), 0o644)
			} else {
				err = os.Mkdir(filepath.Join(root, f), 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if u, err := LookupUser(root, "1000:1000"); err != nil || u.UID != 1000 || u.GID != 1000 {
				t.Errorf("%s: numeric user: %+v %v", kind, u, err)
			}
			if _, err := LookupUser(root, "app"); err == nil {
				t.Errorf("%s: a user name resolved", kind)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: LookupUser hangs on /etc/passwd as a %s", kind, kind)
		}
	}
}
