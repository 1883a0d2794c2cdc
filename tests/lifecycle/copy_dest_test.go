package lifecycle

import (
	"archive/tar"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sbx cp ID:FILE DEST writes into an existing non-directory DEST as cp
// does: a regular file keeps its inode (and the hard links to it), a
// character device is written to and stays a device; other special files
// are refused and left alone.
func TestLifecycleCpIntoExistingDestination(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	h.Must(t, "exec", id, "--", "sh", "-c", "echo small > /small; mkdir /d; echo x > /d/x")
	dir := t.TempDir()

	// A regular file with a second hard link: written in place.
	file, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("old content that is longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "cp", id+":/small", file)
	if b, _ := os.ReadFile(link); string(b) != "small\n" {
		t.Errorf("cp onto an existing file replaced it instead of writing into it: the hard link holds %q", b)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cp onto an existing file changed its mode: %v %v", fi.Mode(), err)
	}

	// A character device (a private /dev/null): written to, still a device.
	null := filepath.Join(dir, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "cp", id+":/small", null)
	if fi, err := os.Lstat(null); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("cp onto a character device replaced it: %v %v", fi.Mode(), err)
	}

	// A directory onto an existing file: refused, the file unchanged.
	r := h.Sbx(t, "", "cp", id+":/d", file)
	if r.Code == 0 {
		t.Errorf("cp of a directory onto a file succeeded")
	}
	if b, _ := os.ReadFile(file); string(b) != "small\n" {
		t.Errorf("a refused cp changed the file: %q", b)
	}

	// A unix socket: refused, left alone.
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r = h.Sbx(t, "", "cp", id+":/small", sock)
	if r.Code == 0 || !strings.Contains(r.Stderr, "special file") {
		t.Errorf("cp onto a socket: exit %d %q; want a refusal naming a special file", r.Code, r.Stderr)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("a refused cp replaced the socket: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Errorf("a file named - appeared")
	}
}

// sbx cp ID:PATH - writes a tar stream of PATH to stdout, and sbx cp -
// ID:DIR unpacks a tar stream from stdin into DIR, as docker cp does.
func TestLifecycleCpTarStreams(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "-w", "/work")
	h.Must(t, "exec", id, "--", "sh", "-c", "mkdir -p /work/d && echo one > /work/d/one")

	out := h.Must(t, "cp", id+":d", "-")
	names := map[string]string{}
	tr := tar.NewReader(strings.NewReader(out))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("sbx cp %s:d - wrote no tar stream: %v (%d bytes)", id, err, len(out))
		}
		b, _ := io.ReadAll(tr)
		names[strings.TrimSuffix(hdr.Name, "/")] = string(b)
	}
	if names["d/one"] != "one\n" {
		t.Fatalf("tar from sbx cp %s:d -: %v", id, names)
	}
	if _, err := os.Stat("-"); err == nil {
		t.Fatalf("sbx cp wrote a file named -")
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "in/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "in/two", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4})
	_, _ = tw.Write([]byte("two\n"))
	_ = tw.Close()
	h.Must(t, "exec", id, "--", "mkdir", "/work/up")
	cmd := h.Command("cp", "-", id+":up")
	cmd.Stdin = &buf
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbx cp - %s:up: %v %s", id, err, stderr.String())
	}
	if got := h.Must(t, "exec", id, "--", "cat", "/work/up/in/two"); got != "two\n" {
		t.Fatalf("cp - %s:up landed elsewhere: %q", id, got)
	}
	// Into a path that is not a directory: refused.
	cmd = h.Command("cp", "-", id+":/work/d/one")
	cmd.Stdin = bytes.NewReader(nil)
	if err := cmd.Run(); err == nil {
		t.Errorf("sbx cp - into a file succeeded")
	}
}
