package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// mkfiles makes the empty files and directories (names ending in /) of
// names under dir.
func mkfiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if n[len(n)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMountStubs(t *testing.T) {
	upper, lower := t.TempDir(), t.TempDir()
	mkfiles(t, upper, "run/secrets/", "src/app/main.go", "etc/ssh/known_hosts")
	if err := os.WriteFile(filepath.Join(upper, "src/app/main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkfiles(t, lower, "etc/")
	got := mountStubs(upper, []string{lower}, []string{"/run/secrets", "src/app", "etc/ssh/known_hosts"})
	want := map[string]bool{
		"run/secrets": true, "run": true, // made by the step, left empty
		"src/app": false, "src": false, // holds a file the step wrote
		"etc/ssh/known_hosts": true, "etc/ssh": true, // etc is the image's
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mountStubs = %v, want %v", got, want)
	}
}

// TestMountStubsStayInTheLayer plants symlinks in a writable layer (the
// sandbox's to write) and in an image layer that point at a host
// directory holding what would look like stubs: the look must stay inside
// each layer, so what the host holds decides nothing.
func TestMountStubsStayInTheLayer(t *testing.T) {
	host := t.TempDir()
	mkfiles(t, host, "b/c", "x", "q")
	upper, lower := t.TempDir(), t.TempDir()
	for link, to := range map[string]string{
		"a": host, // absolute
		"r": relTo(t, upper, host),
	} {
		if err := os.Symlink(to, filepath.Join(upper, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(host, filepath.Join(lower, "l")); err != nil {
		t.Fatal(err)
	}
	// The layer's own l/q: a stub, whatever the image's l points at (the
	// host's q is there, and must not count as the image's).
	mkfiles(t, upper, "l/q")
	got := mountStubs(upper, []string{lower}, []string{"a/b/c", "r/x", "l/q"})
	want := map[string]bool{"l/q": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mountStubs = %v, want %v (nothing decided through a symlink out of a layer)", got, want)
	}
}

// relTo is target relative to dir.
func relTo(t *testing.T, dir, target string) string {
	t.Helper()
	r, err := filepath.Rel(dir, target)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
