package fileops

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// tarOf builds a tar stream of hdrs; a regular file's content is its
// header's Linkname field when Typeflag is TypeReg (Size is set from it).
func tarOf(t *testing.T, entries ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h := *h
		var data []byte
		if h.Typeflag == tar.TypeReg {
			data = []byte(h.Linkname)
			h.Linkname = ""
			h.Size = int64(len(data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func reg(name, content string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Linkname: content}
}

// tree lists everything under dir with its type and content, to compare a
// directory before and after a refused extraction.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			line += " " + string(data)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestExtractRefusesEscapes: every entry that would land outside the target
// directory, and every unsupported type, refuses the whole archive and
// leaves the directory (and the outside) exactly as they were, even after
// earlier entries of the same archive were written.
func TestExtractRefusesEscapes(t *testing.T) {
	cases := []struct {
		name    string
		entries func(outside string) []*tar.Header
		code    string
	}{
		{"absolute name", func(o string) []*tar.Header { return []*tar.Header{reg(o+"/pwned", "x")} }, api.CodeUnsafePath},
		{"dotdot", func(string) []*tar.Header { return []*tar.Header{reg("../outside/pwned", "x")} }, api.CodeUnsafePath},
		{"dotdot after a good entry", func(string) []*tar.Header {
			return []*tar.Header{reg("good", "x"), reg("a/../../outside/pwned", "x")}
		}, api.CodeUnsafePath},
		{"through an absolute symlink", func(o string) []*tar.Header {
			return []*tar.Header{{Name: "s", Typeflag: tar.TypeSymlink, Linkname: o}, reg("s/pwned", "x")}
		}, api.CodeUnsafePath},
		{"through a relative symlink", func(string) []*tar.Header {
			return []*tar.Header{{Name: "s", Typeflag: tar.TypeSymlink, Linkname: "../outside"}, reg("s/pwned", "x")}
		}, api.CodeUnsafePath},
		{"hard link to outside", func(string) []*tar.Header {
			return []*tar.Header{{Name: "hl", Typeflag: tar.TypeLink, Linkname: "../outside/canary"}}
		}, api.CodeUnsafePath},
		{"hard link through a symlink", func(o string) []*tar.Header {
			return []*tar.Header{{Name: "s", Typeflag: tar.TypeSymlink, Linkname: o}, {Name: "hl", Typeflag: tar.TypeLink, Linkname: "s/canary"}}
		}, api.CodeUnsafePath},
		{"character device", func(string) []*tar.Header {
			return []*tar.Header{reg("good", "x"), {Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}
		}, api.CodeBadRequest},
		{"block device", func(string) []*tar.Header {
			return []*tar.Header{{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}
		}, api.CodeBadRequest},
		{"FIFO", func(string) []*tar.Header { return []*tar.Header{{Name: "p", Typeflag: tar.TypeFifo}} }, api.CodeBadRequest},
		{"file over a directory", func(string) []*tar.Header { return []*tar.Header{reg("keep", "x")} }, api.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, base := newFiles(t)
			outside := filepath.Join(base, "outside")
			writeFile(t, filepath.Join(outside, "canary"), "canary", 0o644)
			dst := filepath.Join(base, "dst")
			writeFile(t, filepath.Join(dst, "keep", "inner"), "inner", 0o644)
			writeFile(t, filepath.Join(dst, "good"), "old", 0o644)
			before := tree(t, base)
			res, err := f.Extract(dst, tarOf(t, c.entries(outside)...))
			if code(err) != c.code {
				t.Fatalf("error %v (code %q), want code %q", err, code(err), c.code)
			}
			if !strings.Contains(err.Error(), "tar entry") {
				t.Errorf("the error does not name the entry: %v", err)
			}
			if res.Entries != 0 || res.Bytes != 0 {
				t.Errorf("a refused archive reports %d entries, %d bytes", res.Entries, res.Bytes)
			}
			if after := tree(t, base); after != before {
				t.Errorf("a refused archive changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestExtractRefusedLeavesNoNewDirectory: a refused archive into a
// directory that did not exist removes the directories Extract made.
func TestExtractRefusedLeavesNoNewDirectory(t *testing.T) {
	f, base := newFiles(t)
	dst := filepath.Join(base, "a", "b")
	if _, err := f.Extract(dst, tarOf(t, reg("ok", "x"), reg("../../../x", "x"))); code(err) != api.CodeUnsafePath {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "a")); !os.IsNotExist(err) {
		t.Errorf("the refused extraction left %s: %v", filepath.Join(base, "a"), err)
	}
	if _, err := f.Extract(dst, strings.NewReader("this is not a tar stream, and it is longer than one block "+strings.Repeat("x", 600))); code(err) != api.CodeBadRequest {
		t.Fatalf("a broken stream: %v", err)
	}
}

// TestExtractAndArchiveRoundTrip: what WriteArchive writes, Extract
// restores: files with their modes and mtimes, directories, symlinks (as
// links, never followed) and hard links; an entry replaces a symlink
// rather than writing through it.
func TestExtractAndArchiveRoundTrip(t *testing.T) {
	f, base := newFiles(t)
	src := filepath.Join(base, "src")
	writeFile(t, filepath.Join(src, "run.sh"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(src, "d", "data"), "data", 0o600)
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d/data", filepath.Join(src, "rel-link")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1_600_000_000, 0)
	if err := os.Chtimes(filepath.Join(src, "run.sh"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := f.WriteArchive(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(base, "dst")
	res, err := f.Extract(dst, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 6 || res.Bytes != int64(len("#!/bin/sh\n")+len("data")) {
		t.Errorf("result %+v", res)
	}
	if got, want := tree(t, filepath.Join(dst, "src")), tree(t, src); got != want {
		t.Errorf("round trip:\n%s\nwant:\n%s", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dst, "src", "run.sh")); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("mtime: %v %v", fi.ModTime(), err)
	}

	// A regular entry over an existing symlink replaces the link.
	target := filepath.Join(base, "target")
	writeFile(t, target, "keep", 0o644)
	if err := os.Symlink(target, filepath.Join(dst, "l")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Extract(dst, tarOf(t, reg("l", "new"), &tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "l"})); err != nil {
		t.Fatal(err)
	}
	if readFile(t, target) != "keep" || readFile(t, filepath.Join(dst, "l")) != "new" || readFile(t, filepath.Join(dst, "hl")) != "new" {
		t.Errorf("replacing a symlink: target %q, l %q", readFile(t, target), readFile(t, filepath.Join(dst, "l")))
	}

	// An archive of one file is that file, by its base name; special
	// files are left out of an archive.
	buf.Reset()
	if err := f.WriteArchive(&buf, filepath.Join(src, "run.sh")); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	if h, err := tr.Next(); err != nil || h.Name != "run.sh" || h.Mode&0o777 != 0o755 {
		t.Fatalf("archive of a file: %+v %v", h, err)
	}
	if err := f.WriteArchive(&buf, filepath.Join(base, "missing")); code(err) != api.CodeNotFound {
		t.Errorf("archive of a missing path: %v", err)
	}
}
