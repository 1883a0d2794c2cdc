package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestExecutorRefusesSpecialFiles: reads of a FIFO or a device answer at
// once with a clear error instead of blocking (and pinning a thread) or
// streaming forever.
func TestExecutorRefusesSpecialFiles(t *testing.T) {
	e := startExecutor(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	calls := []struct {
		what string
		call func(ctx context.Context) error
	}{
		{"read a FIFO", func(ctx context.Context) error {
			_, err := e.client.ReadFile(ctx, fifo, io.Discard, 1<<20)
			return err
		}},
		{"read lines of a FIFO", func(ctx context.Context) error {
			_, err := e.client.ReadLines(ctx, fifo, 1, 2, 1<<20)
			return err
		}},
		{"view a FIFO", func(ctx context.Context) error {
			_, err := e.client.Edit(ctx, api.EditRequest{Command: "view", Path: fifo})
			return err
		}},
		{"list a FIFO", func(ctx context.Context) error {
			_, err := e.client.List(ctx, fifo)
			if client.IsCode(err, api.CodeBadRequest) {
				return &client.Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeNotRegular, Message: "not a regular file (a directory was wanted)"}
			}
			return err
		}},
		{"read /dev/zero", func(ctx context.Context) error {
			_, err := e.client.ReadFile(ctx, "/dev/zero", io.Discard, 1<<40)
			return err
		}},
		{"read lines of /dev/zero", func(ctx context.Context) error {
			_, err := e.client.ReadLines(ctx, "/dev/zero", 1, 2, 1<<20)
			return err
		}},
	}
	for _, c := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.call(ctx)
		cancel()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != api.CodeNotRegular || ce.Status != http.StatusUnsupportedMediaType {
			t.Fatalf("%s: want %s (415), got %v", c.what, api.CodeNotRegular, err)
		}
		if !strings.Contains(ce.Message, "not a regular file") {
			t.Fatalf("%s: unclear message %q", c.what, ce.Message)
		}
	}
}

// TestExecutorArchiveAllOrNothing: an archive refused part-way changes
// nothing, whatever its good entries before the bad one did.
func TestExecutorArchiveAllOrNothing(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	base := t.TempDir()
	dst := filepath.Join(base, "dst")
	os.MkdirAll(filepath.Join(dst, "d"), 0o755)
	os.WriteFile(filepath.Join(dst, "keep"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dst, "d/inner"), []byte("inner"), 0o600)
	os.Symlink("keep", filepath.Join(dst, "link"))
	want := treeSnapshot(t, dst)
	good := []tarEntry{
		{name: "new.txt", body: "new", typ: tar.TypeReg},
		{name: "deep/er/file", body: "x", typ: tar.TypeReg},
		{name: "keep", body: "replaced", typ: tar.TypeReg},
		{name: "link", body: "not a link", typ: tar.TypeReg},
		{name: "d/", typ: tar.TypeDir},
		{name: "d/inner", body: "changed", typ: tar.TypeReg},
		{name: "sym", link: "keep", typ: tar.TypeSymlink},
		{name: "hard", link: "new.txt", typ: tar.TypeLink},
	}
	bad := map[string]tarEntry{
		api.CodeUnsafePath: {name: "../escape", body: "x", typ: tar.TypeReg},
		api.CodeBadRequest: {name: "dev", typ: tar.TypeChar},
	}
	for code, b := range bad {
		data := makeTar(t, append(append([]tarEntry{}, good...), b))
		if _, err := e.client.PutArchive(ctx, dst, bytes.NewReader(data)); !client.IsCode(err, code) {
			t.Fatalf("archive ending in %q: want %s, got %v", b.name, code, err)
		}
		if got := treeSnapshot(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("a refused archive changed the target:\n got %v\nwant %v", sorted(got), sorted(want))
		}
		// A stream cut in the middle of the last entry changes nothing
		// either.
		full := makeTar(t, append(append([]tarEntry{}, good...), tarEntry{name: "big", body: strings.Repeat("b", 4000), typ: tar.TypeReg}))
		if _, err := e.client.PutArchive(ctx, dst, bytes.NewReader(full[:len(full)-1024-2000])); err == nil {
			t.Fatal("a truncated archive was accepted")
		}
		if got := treeSnapshot(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("a truncated archive changed the target:\n got %v\nwant %v", sorted(got), sorted(want))
		}
	}
	// A target created for a refused archive does not stay behind.
	fresh := filepath.Join(base, "fresh/sub")
	data := makeTar(t, append(append([]tarEntry{}, good[:2]...), bad[api.CodeUnsafePath]))
	if _, err := e.client.PutArchive(ctx, fresh, bytes.NewReader(data)); !client.IsCode(err, api.CodeUnsafePath) {
		t.Fatalf("fresh target: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "fresh")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused archive's target stayed: %v", err)
	}
	// The same archive without the bad entry applies in full.
	res, err := e.client.PutArchive(ctx, dst, bytes.NewReader(makeTar(t, good)))
	if err != nil || res.Entries != len(good) {
		t.Fatalf("good archive: %+v %v", res, err)
	}
	got := treeSnapshot(t, dst)
	if !strings.HasSuffix(got["keep"], " replaced") || !strings.HasSuffix(got["d/inner"], " changed") || !strings.HasSuffix(got["link"], " not a link") || !strings.HasSuffix(got["hard"], " new") {
		t.Fatalf("good archive result: %v", sorted(got))
	}
	for name := range got {
		if strings.HasPrefix(name, ".sbx") {
			t.Fatalf("extraction left %s behind", name)
		}
	}
}
