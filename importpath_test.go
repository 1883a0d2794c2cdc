package sbx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

func TestCheckImportPath(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "rootfs")
	layout := filepath.Join(dir, "layout")
	file := filepath.Join(dir, "image.tar")
	for _, d := range []string{filepath.Join(plain, "etc"), layout} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(layout, "index.json"), file} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path    string
		dir     bool
		invalid string // a piece of the message, or "" for no error
	}{
		{layout, true, ""},
		{file, false, ""},
		{plain, true, "not an OCI image layout (it has no index.json); to import a root file system directory, tar it first"},
		{filepath.Join(dir, "missing"), false, "no such file"},
	} {
		isDir, err := sbx.CheckImportPath(c.path)
		switch {
		case c.invalid == "" && err != nil:
			t.Errorf("%s: %v", c.path, err)
		case c.invalid != "" && (!errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), c.invalid)):
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", c.path, err, c.invalid)
		case isDir != c.dir:
			t.Errorf("%s: isDir = %v, want %v", c.path, isDir, c.dir)
		}
	}
}
