package fullfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOverwrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Within the allocated block: shorter and a little longer.
	for _, s := range []string{"short", strings.Repeat("y", 300)} {
		if err := Overwrite(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != s {
			t.Fatalf("got %q", b)
		}
	}
	// Beyond what the file holds: refused, the file unchanged.
	if err := Overwrite(p, make([]byte, 1<<20)); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a write beyond the allocated blocks: %v", err)
	}
	if b, _ := os.ReadFile(p); len(b) != 300 {
		t.Fatalf("a refused overwrite changed the file: %d bytes", len(b))
	}
	if err := Overwrite(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("overwrite of a missing file succeeded")
	}
	if !IsFull(unix.EDQUOT) || IsFull(unix.EIO) {
		t.Fatal("IsFull")
	}
}
