package client

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type tarEntry struct {
	name, link string
	typ        byte
	body       string
	mode       int64
}

func makeTar(t *testing.T, entries []tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// A sandbox controls the tar that CopyFrom unpacks on the host; nothing in
// it may land outside the destination.
func TestExtractTarRefusesEscapes(t *testing.T) {
	for name, entries := range map[string][]tarEntry{
		"dotdot":          {{name: "../escape", typ: tar.TypeReg, body: "x"}},
		"absolute":        {{name: "/escape", typ: tar.TypeReg, body: "x"}},
		"through symlink": {{name: "d/up", typ: tar.TypeSymlink, link: "/"}, {name: "d/up/escape", typ: tar.TypeReg, body: "x"}},
		"relative link":   {{name: "d/up", typ: tar.TypeSymlink, link: "../.."}, {name: "d/up/escape", typ: tar.TypeReg, body: "x"}},
		"hardlink out":    {{name: "d/h", typ: tar.TypeLink, link: "../../escape-target"}},
		"device":          {{name: "d/null", typ: tar.TypeChar}},
	} {
		t.Run(name, func(t *testing.T) {
			outer := t.TempDir()
			dest := filepath.Join(outer, "dest")
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outer, "escape-target"), []byte("host"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := extractTar(makeTar(t, entries), dest, "")
			if err == nil {
				t.Fatal("hostile tar extracted without error")
			}
			got, _ := filepath.Glob(filepath.Join(outer, "*"))
			if len(got) != 2 {
				t.Fatalf("something landed outside the destination: %v", got)
			}
			if _, err := os.Stat("/escape"); err == nil {
				t.Fatal("/escape was created")
			}
		})
	}
}

func TestExtractTarRenameAndModes(t *testing.T) {
	dest := t.TempDir()
	err := extractTar(makeTar(t, []tarEntry{
		{name: "src/", typ: tar.TypeDir, mode: 0o755},
		{name: "src/run", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
		{name: "src/sub/file", typ: tar.TypeReg, body: "deep"},
		{name: "src/link", typ: tar.TypeSymlink, link: "run"},
		{name: "src/hard", typ: tar.TypeLink, link: "src/run"},
	}), dest, "copy")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dest, "copy/run"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v: want 0755 without setuid", fi.Mode())
	}
	data, err := os.ReadFile(filepath.Join(dest, "copy/sub/file"))
	if err != nil || string(data) != "deep" {
		t.Fatalf("renamed tree: %q %v", data, err)
	}
	if l, _ := os.Readlink(filepath.Join(dest, "copy/link")); l != "run" {
		t.Fatalf("symlink: %q", l)
	}
	if data, _ := os.ReadFile(filepath.Join(dest, "copy/hard")); !strings.HasPrefix(string(data), "#!") {
		t.Fatal("hard link not created within the copy")
	}
}
