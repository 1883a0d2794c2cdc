package copyout

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteInto(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "dst")
	write := func(entries []entry, max int64) error {
		f, err := os.OpenFile(dst, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return WriteInto(makeTar(t, entries), "f", f, max)
	}
	if err := os.WriteFile(dst, []byte("old and longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := write([]entry{{name: "f", typ: tar.TypeReg, body: "new\n"}}, 100); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "new\n" {
		t.Fatalf("content %q", b)
	}
	for name, tc := range map[string]struct {
		entries []entry
		refused bool
	}{
		"a directory":     {[]entry{{name: "f/", typ: tar.TypeDir}}, false},
		"another name":    {[]entry{{name: "g", typ: tar.TypeReg, body: "x"}}, true},
		"a second entry":  {[]entry{{name: "f", typ: tar.TypeReg, body: "x"}, {name: "f/y", typ: tar.TypeReg}}, true},
		"too large":       {[]entry{{name: "f", typ: tar.TypeReg, body: "0123456789abcdef"}}, true},
		"nothing":         {nil, true},
		"a symlink":       {[]entry{{name: "f", typ: tar.TypeSymlink, link: "/etc/passwd"}}, false},
		"a device (char)": {[]entry{{name: "f", typ: tar.TypeChar}}, false},
	} {
		if err := os.WriteFile(dst, []byte("kept\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := write(tc.entries, 10)
		if err == nil || errors.Is(err, ErrRefused) != tc.refused {
			t.Errorf("%s: %v (refused: want %v)", name, err, tc.refused)
		}
		if b, _ := os.ReadFile(dst); name != "a second entry" && string(b) != "kept\n" {
			t.Errorf("%s: the destination changed to %q", name, b)
		}
	}
}
