package copyout

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

type entry struct {
	name, link string
	typ        byte
	body       string
	mode       int64
	size       int64 // header size when it differs from the body's
}

func makeTar(t *testing.T, entries []entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.size != 0 {
			hdr.Size = e.size
		}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg && e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Flush()
	return &buf
}

// tree lists every path under dir with its type, and file contents.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out = append(out, rel+" -> "+l)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			data, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(data))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// home is a user's directory with a file that a hostile copy would like to
// overwrite, and a file outside it.
func home(t *testing.T) (outer, dir string) {
	t.Helper()
	outer = t.TempDir()
	dir = filepath.Join(outer, "home")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".bashrc"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(outer, "escape-target"), []byte("host"), 0o600)
	return outer, dir
}

// Everything a sandbox can put in the stream of `sbx cp ID:/etc/report.txt
// ~/report.txt` (top "report.txt", destination new) or of `sbx cp ID:/data
// ~` (top "data", destination an existing directory). Each must be refused
// and leave the user's directory exactly as it was.
func TestExtractRefusesHostileStreams(t *testing.T) {
	for name, entries := range map[string][]entry{
		// The case found by the audit: a symlink to "." at the top, then a
		// file through it.
		"symlink to . then through it":  {{name: "report.txt", typ: tar.TypeSymlink, link: "."}, {name: "report.txt/.bashrc", typ: tar.TypeReg, body: "owned"}},
		"symlink below then through":    {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/up", typ: tar.TypeSymlink, link: ".."}, {name: "report.txt/up/.bashrc", typ: tar.TypeReg, body: "owned"}},
		"absolute symlink then through": {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/up", typ: tar.TypeSymlink, link: "/"}, {name: "report.txt/up/escape", typ: tar.TypeReg, body: "x"}},
		"entry outside the top":         {{name: "report.txt", typ: tar.TypeReg, body: "ok"}, {name: ".bashrc", typ: tar.TypeReg, body: "owned"}},
		"dotdot":                        {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/../.bashrc", typ: tar.TypeReg, body: "owned"}},
		"absolute":                      {{name: "/report.txt", typ: tar.TypeReg, body: "x"}},
		"hardlink out":                  {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/h", typ: tar.TypeLink, link: "../escape-target"}},
		"hardlink to a non-file":        {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/h", typ: tar.TypeLink, link: "report.txt"}},
		"device":                        {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/null", typ: tar.TypeChar}},
		"fifo":                          {{name: "report.txt", typ: tar.TypeFifo}},
		"child before its top":          {{name: "report.txt/x", typ: tar.TypeReg, body: "x"}},
		"too big":                       {{name: "report.txt", typ: tar.TypeReg, body: strings.Repeat("x", 2048)}},
		"truncated":                     {{name: "report.txt", typ: tar.TypeReg, body: "abc", size: 100}},
		"file replaces a directory":     {{name: "report.txt", typ: tar.TypeDir}, {name: "report.txt/d", typ: tar.TypeDir}, {name: "report.txt/d", typ: tar.TypeReg, body: "x"}},
		"empty":                         {},
	} {
		t.Run(name, func(t *testing.T) {
			outer, dir := home(t)
			before := tree(t, outer)
			err := Extract(makeTar(t, entries), "report.txt", dir, "report.txt", Limits{MaxBytes: 1024})
			if err == nil {
				t.Fatal("hostile stream extracted without error")
			}
			if after := tree(t, outer); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("the user's directory changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func TestExtractNamesInErrorsAreSafe(t *testing.T) {
	_, dir := home(t)
	err := Extract(makeTar(t, []entry{{name: "\x1b]0;owned\x07", typ: tar.TypeReg}}), "report.txt", dir, "report.txt", Limits{})
	if err == nil || !errors.Is(err, ErrRefused) || strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Fatalf("error %q", err)
	}
}

func TestExtractNewTreeModesAndLinks(t *testing.T) {
	_, dir := home(t)
	err := Extract(makeTar(t, []entry{
		{name: "src/", typ: tar.TypeDir, mode: 0o755},
		{name: "src/run", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
		{name: "src/sub/", typ: tar.TypeDir, mode: 0o500},
		{name: "src/sub/file", typ: tar.TypeReg, body: "deep"},
		{name: "src/link", typ: tar.TypeSymlink, link: "/etc/shadow"},
		{name: "src/hard", typ: tar.TypeLink, link: "src/run"},
	}), "src", dir, "copy", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "copy/run"))
	if err != nil || fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v %v: want 0755 without setuid", fi.Mode(), err)
	}
	want := []string{".bashrc=mine", "copy/", "copy/hard=#!/bin/sh\n", "copy/link -> /etc/shadow", "copy/run=#!/bin/sh\n", "copy/sub/", "copy/sub/file=deep"}
	if got := tree(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tree %q, want %q", got, want)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "copy/sub")); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v: the owner keeps write access", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("staging directory left: %v", ents)
	}
}

// Copying into an existing directory merges, replaces files (a symlink of
// the user's is replaced, never followed), and refuses to change a file's
// kind.
func TestExtractMerge(t *testing.T) {
	outer, dir := home(t)
	os.MkdirAll(filepath.Join(dir, "data/keep"), 0o755)
	os.WriteFile(filepath.Join(dir, "data/old"), []byte("old"), 0o644)
	os.Symlink(filepath.Join(outer, "escape-target"), filepath.Join(dir, "data/link"))
	err := Extract(makeTar(t, []entry{
		{name: "data", typ: tar.TypeDir},
		{name: "data/old", typ: tar.TypeReg, body: "new"},
		{name: "data/link", typ: tar.TypeReg, body: "replaced"},
		{name: "data/keep/more", typ: tar.TypeReg, body: "more"},
	}), "data", dir, "data", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".bashrc=mine", "data/", "data/keep/", "data/keep/more=more", "data/link=replaced", "data/old=new"}
	if got := tree(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("tree %q, want %q", got, want)
	}
	if data, _ := os.ReadFile(filepath.Join(outer, "escape-target")); string(data) != "host" {
		t.Fatal("written through the user's symlink")
	}
	err = Extract(makeTar(t, []entry{{name: "data", typ: tar.TypeReg, body: "x"}}), "data", dir, "data", Limits{})
	if err == nil || !strings.Contains(err.Error(), "cannot overwrite directory") {
		t.Fatalf("file over a directory: %v", err)
	}
}

func TestExtractWholeRoot(t *testing.T) {
	_, dir := home(t)
	err := Extract(makeTar(t, []entry{
		{name: "/", typ: tar.TypeDir},
		{name: "/etc/", typ: tar.TypeDir},
		{name: "/etc/hostname", typ: tar.TypeReg, body: "sbx"},
	}), "/", dir, "rootfs", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "rootfs/etc/hostname")); string(data) != "sbx" {
		t.Fatalf("got %q", data)
	}
}
