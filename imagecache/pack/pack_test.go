package pack

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// Write turns an overlayfs upper directory into an OCI layer: the sandbox
// wrote that directory, so nothing in it may be followed.
func TestWrite(t *testing.T) {
	roottest.Require(t, "it reads layers owned by other users and 0:0 whiteouts")
	upper := t.TempDir()
	mk := func(rel string, fn func(p string) error) {
		t.Helper()
		p := filepath.Join(upper, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fn(p); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	write := func(content string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(content), 0o640) }
	}
	mk("app/data", write("payload"))
	mk("app/link-out", func(p string) error { return os.Symlink("/etc/shadow", p) })
	mk("app/hard", func(p string) error { return os.Link(filepath.Join(upper, "app/data"), p) })
	mk("bin/vi", func(p string) error { return unix.Mknod(p, unix.S_IFCHR, 0) })
	mk("home/.keep", write(""))
	if err := unix.Setxattr(filepath.Join(upper, "home"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatalf("set opaque xattr: %v", err)
	}
	mk("tmp/fifo", func(p string) error { return unix.Mkfifo(p, 0o644) })
	mk("etc/hosts", write("127.0.0.1 sandbox\n"))
	mk(".sbx/run/x", write("sbx"))

	var buf bytes.Buffer
	if err := Write(&buf, upper, func(rel string) bool { return rel == ".sbx" || rel == "etc/hosts" }); err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	bodies := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		b, _ := io.ReadAll(tr)
		bodies[h.Name] = string(b)
	}
	if h := got["app/data"]; h == nil || h.Typeflag != tar.TypeReg || bodies["app/data"] != "payload" || h.Mode&0o777 != 0o640 {
		t.Errorf("app/data: %+v %q", h, bodies["app/data"])
	}
	if h := got["app/link-out"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/shadow" {
		t.Errorf("symlink must be stored, not followed: %+v", h)
	}
	if h := got["app/hard"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "app/data" {
		t.Errorf("hard link: %+v", h)
	}
	if h := got["bin/.wh.vi"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("whiteout of bin/vi: %+v", h)
	}
	if got["bin/vi"] != nil {
		t.Error("the whiteout device itself was exported")
	}
	if got["home/.wh..wh..opq"] == nil {
		t.Error("opaque directory marker missing")
	}
	for _, name := range []string{"tmp/fifo", "etc/hosts", ".sbx/", ".sbx/run/x"} {
		if got[name] != nil {
			t.Errorf("%s must not be exported", name)
		}
	}
}
