package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshotDigestsCatchChanges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"layer.tar": "layer", "criu/pages-1.img": "pages", "restore.json": "{}"})
	files, size, err := digestTree(dir)
	if err != nil || len(files) != 3 || size != int64(len("layer")+len("pages")+2) {
		t.Fatalf("digestTree: %v %d %v", files, size, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "criu", "pages-1.img")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("files are left %v, want 0600", fi.Mode().Perm())
	}
	snap := &sbx.Snapshot{Name: "s", Files: files}
	if err := verifySnapshot(dir, snap); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(){
		func() { writeFiles(t, dir, map[string]string{"layer.tar": "layeR"}) },
		func() { os.Remove(filepath.Join(dir, "restore.json")) },
		func() { writeFiles(t, dir, map[string]string{"criu/extra.img": "x"}) },
	} {
		d2 := t.TempDir()
		writeFiles(t, d2, map[string]string{"layer.tar": "layer", "criu/pages-1.img": "pages", "restore.json": "{}"})
		dir = d2
		change()
		if err := verifySnapshot(dir, snap); !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), "changed on disk") {
			t.Fatalf("a change went unseen: %v", err)
		}
	}
}

func TestSnapshotImportRefusesStrangeEntries(t *testing.T) {
	for _, name := range []string{"../x", "/etc/passwd", "a/b/c", "other/x", ".lock", "criu/../../x"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		if err := importSnapshotFiles(&buf, t.TempDir()); !errors.Is(err, sbx.ErrInvalid) {
			t.Errorf("entry %q: %v, want refused", name, err)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "criu/link", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink})
	tw.Close()
	if err := importSnapshotFiles(&buf, t.TempDir()); !errors.Is(err, sbx.ErrInvalid) {
		t.Errorf("a symlink: %v, want refused", err)
	}
}

func TestSnapshotRecordFormat(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"snapshot.json": `{"name":"s","format":2}`})
	if _, err := readSnapshot(dir); err == nil || !strings.Contains(err.Error(), "newer sbx") {
		t.Fatalf("format 2: %v", err)
	}
	writeFiles(t, dir, map[string]string{"snapshot.json": `{"name":"s"}`})
	if _, err := readSnapshot(dir); err == nil {
		t.Fatal("no format: accepted")
	}
}

func TestDigestRef(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox:latest":                 "busybox@sha256:ab",
		"127.0.0.1:5000/a/b:v1":          "127.0.0.1:5000/a/b@sha256:ab",
		"127.0.0.1:5000/a/b":             "127.0.0.1:5000/a/b@sha256:ab",
		"debian@sha256:00":               "debian@sha256:ab",
		"localhost:5000/x:1@sha256:0000": "localhost:5000/x@sha256:ab",
	} {
		if got := digestRef(ref, "sha256:ab"); got != want {
			t.Errorf("digestRef(%q) = %q, want %q", ref, got, want)
		}
	}
}
