package privatefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReadPrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := Write(p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if b, err := Read(p, 10); err != nil || string(b) != "x" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := Read(p, 0); err == nil {
		t.Fatal("read past the cap")
	}
	_ = os.Chmod(p, 0o640)
	if _, err := Read(p, 10); err == nil {
		t.Fatal("read a file others may read")
	}
	l := p + "-link"
	_ = os.Symlink(p, l)
	_ = os.Chmod(p, 0o600)
	if _, err := Read(l, 10); err == nil {
		t.Fatal("followed a symlink")
	}
	if _, err := Read(p+"-missing", 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
