package executor

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

func strp(s string) *string { return &s }
func intp(i int) *int       { return &i }

func TestExecutorFilesReadWrite(t *testing.T) {
	e := startExecutor(t, "--user", "1000:1000")
	ctx := harness.Context(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "new/sub/file.txt")

	// PUT creates parents, owned by the default user; GET returns the bytes.
	res, err := e.client.WriteFile(ctx, p, strings.NewReader("one\ntwo\nthree\n"), 0)
	if err != nil || res.Bytes != 14 || res.Path != p {
		t.Fatalf("write: %+v %v", res, err)
	}
	for _, q := range []string{p, filepath.Dir(p), filepath.Dir(filepath.Dir(p))} {
		fi, err := os.Stat(q)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1000 || st.Gid != 1000 {
			t.Fatalf("%s owned by %d:%d, want 1000:1000", q, st.Uid, st.Gid)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode())
	}
	var b bytes.Buffer
	if _, err := e.client.ReadFile(ctx, p, &b, 1<<20); err != nil || b.String() != "one\ntwo\nthree\n" {
		t.Fatalf("read: %q %v", b.String(), err)
	}
	lines, err := e.client.ReadLines(ctx, p, 2, 3, 1<<20)
	if err != nil || string(lines) != "two\nthree\n" {
		t.Fatalf("lines 2-3: %q %v", lines, err)
	}
	lines, err = e.client.ReadLines(ctx, p, 2, -1, 1<<20)
	if err != nil || string(lines) != "two\nthree\n" {
		t.Fatalf("lines 2-end: %q %v", lines, err)
	}
	if _, err := e.client.ReadLines(ctx, p, 9, 10, 1<<20); !client.IsCode(err, api.CodeBadRange) {
		t.Fatalf("lines 9-10: %v", err)
	}
	// Relative paths start at the working directory (here /).
	rel := strings.TrimPrefix(p, "/")
	b.Reset()
	if _, err := e.client.ReadFile(ctx, rel, &b, 1<<20); err != nil || b.Len() != 14 {
		t.Fatalf("relative read: %v", err)
	}
	// The caller's size cap holds.
	if _, err := e.client.ReadFile(ctx, p, io.Discard, 5); err == nil || !strings.Contains(err.Error(), "size cap") {
		t.Fatalf("read over cap: %v", err)
	}

	// Overwrite keeps owner and mode; ?mode sets it.
	os.Chmod(p, 0o600)
	os.Chown(p, 1234, 1234)
	if _, err := e.client.WriteFile(ctx, p, strings.NewReader("v2"), 0); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != 1234 {
		t.Fatalf("overwrite changed mode/owner: %v %d", fi.Mode(), st.Uid)
	}
	if _, err := e.client.WriteFile(ctx, p, strings.NewReader("v3"), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after ?mode=755: %v", fi.Mode())
	}
	// No temporary files are left next to it.
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries after writes", len(ents))
	}

	// Errors.
	if _, err := e.client.ReadFile(ctx, filepath.Join(dir, "missing"), io.Discard, 1<<20); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := e.client.ReadFile(ctx, dir, io.Discard, 1<<20); !client.IsCode(err, api.CodeIsDirectory) {
		t.Fatalf("read of a directory: %v", err)
	}
	if _, err := e.client.WriteFile(ctx, dir, strings.NewReader("x"), 0); !client.IsCode(err, api.CodeIsDirectory) {
		t.Fatalf("write over a directory: %v", err)
	}
	if _, err := e.client.ReadFile(ctx, "", io.Discard, 1<<20); !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("empty path: %v", err)
	}
	bin := filepath.Join(dir, "bin")
	os.WriteFile(bin, []byte{0, 1, 2, 0xff}, 0o644)
	if _, err := e.client.ReadLines(ctx, bin, 1, 1, 1<<20); !client.IsCode(err, api.CodeBinary) {
		t.Fatalf("lines of a binary file: %v", err)
	}
	b.Reset()
	if _, err := e.client.ReadFile(ctx, bin, &b, 1<<20); err != nil || b.Len() != 4 {
		t.Fatalf("raw read of a binary file: %v", err)
	}
}

func TestExecutorFsList(t *testing.T) {
	e := startExecutor(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "zdir"), 0o750)
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("12345"), 0o640)
	os.WriteFile(filepath.Join(dir, ".hidden"), nil, 0o600)
	os.Symlink("b.txt", filepath.Join(dir, "link"))
	mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(dir, "b.txt"), mt, mt)
	l, err := e.client.List(harness.Context(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range l.Entries {
		names = append(names, en.Name+":"+en.Type+":"+en.Mode)
	}
	want := "adir:dir:0755 zdir:dir:0750 .hidden:file:0600 b.txt:file:0640 link:symlink:0777"
	if strings.Join(names, " ") != want {
		t.Fatalf("entries %v, want %s", names, want)
	}
	if en := l.Entries[3]; en.Size != 5 || !strings.HasPrefix(en.Mtime, "2020-01-02T03:04:05") {
		t.Fatalf("b.txt entry %+v", en)
	}
	if _, err := e.client.List(harness.Context(t), filepath.Join(dir, "b.txt")); !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("list of a file: %v", err)
	}
	if _, err := e.client.List(harness.Context(t), filepath.Join(dir, "nope")); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("list of a missing dir: %v", err)
	}
}

func TestExecutorEdit(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "code/main.py")
	edit := func(req api.EditRequest) (api.EditResult, error) {
		if req.Path == "" {
			req.Path = p
		}
		return e.client.Edit(ctx, req)
	}
	mustEdit := func(req api.EditRequest) string {
		t.Helper()
		res, err := edit(req)
		if err != nil {
			t.Fatalf("%s: %v", req.Command, err)
		}
		return res.Output
	}
	wantCode := func(req api.EditRequest, code string) *client.Error {
		t.Helper()
		_, err := edit(req)
		ce, ok := err.(*client.Error)
		if !ok || ce.Code != code {
			t.Fatalf("%s %+v: want %s, got %v", req.Command, req, code, err)
		}
		return ce
	}
	file := func() string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	// create
	wantCode(api.EditRequest{Command: "create"}, api.CodeBadRequest) // no file_text
	mustEdit(api.EditRequest{Command: "create", FileText: strp("a = 1\nb = 2\nc = 3\nb = 2\n")})
	wantCode(api.EditRequest{Command: "create", FileText: strp("x")}, api.CodeExists)
	if file() != "a = 1\nb = 2\nc = 3\nb = 2\n" {
		t.Fatalf("created %q", file())
	}

	// view
	if out := mustEdit(api.EditRequest{Command: "view"}); out != "     1\ta = 1\n     2\tb = 2\n     3\tc = 3\n     4\tb = 2\n" {
		t.Fatalf("view %q", out)
	}
	if out := mustEdit(api.EditRequest{Command: "view", ViewRange: []int{2, 3}}); out != "     2\tb = 2\n     3\tc = 3\n" {
		t.Fatalf("view 2-3 %q", out)
	}
	if out := mustEdit(api.EditRequest{Command: "view", ViewRange: []int{3, -1}}); out != "     3\tc = 3\n     4\tb = 2\n" {
		t.Fatalf("view 3-end %q", out)
	}
	for _, vr := range [][]int{{0, 2}, {5, 6}, {3, 2}, {1, 9}, {1}} {
		wantCode(api.EditRequest{Command: "view", ViewRange: vr}, api.CodeBadRange)
	}
	// view of a directory: two levels deep, hidden entries excluded.
	os.MkdirAll(filepath.Join(dir, "code/pkg/deep/deeper"), 0o755)
	os.WriteFile(filepath.Join(dir, "code/pkg/mod.py"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "code/pkg/deep/too-deep.py"), nil, 0o644)
	os.MkdirAll(filepath.Join(dir, "code/.git"), 0o755)
	out := mustEdit(api.EditRequest{Command: "view", Path: filepath.Join(dir, "code")})
	c := filepath.Join(dir, "code")
	want := c + "/main.py\n" + c + "/pkg/\n" + c + "/pkg/deep/\n" + c + "/pkg/mod.py\n[1 hidden entries excluded]\n"
	if out != want {
		t.Fatalf("view dir:\n%s\nwant:\n%s", out, want)
	}

	// str_replace
	wantCode(api.EditRequest{Command: "str_replace", NewStr: strp("x")}, api.CodeBadRequest)
	wantCode(api.EditRequest{Command: "str_replace", OldStr: strp("c = 3"), NewStr: strp("c = 3")}, api.CodeBadRequest)
	wantCode(api.EditRequest{Command: "str_replace", OldStr: strp("zzz"), NewStr: strp("y")}, api.CodeNoMatch)
	ce := wantCode(api.EditRequest{Command: "str_replace", OldStr: strp("b = 2"), NewStr: strp("b = 20")}, api.CodeMultiMatch)
	if len(ce.Lines) != 2 || ce.Lines[0] != 2 || ce.Lines[1] != 4 || !strings.Contains(ce.Message, "[2 4]") {
		t.Fatalf("multiple matches: %+v", ce)
	}
	out = mustEdit(api.EditRequest{Command: "str_replace", OldStr: strp("c = 3\nb = 2"), NewStr: strp("c = 30\nb = 40")})
	if file() != "a = 1\nb = 2\nc = 30\nb = 40\n" || !strings.Contains(out, "     3\tc = 30\n") {
		t.Fatalf("after str_replace %q, output %q", file(), out)
	}
	mustEdit(api.EditRequest{Command: "str_replace", OldStr: strp("a = 1\n")}) // no new_str deletes
	if file() != "b = 2\nc = 30\nb = 40\n" {
		t.Fatalf("after deletion %q", file())
	}

	// insert
	wantCode(api.EditRequest{Command: "insert", NewStr: strp("x")}, api.CodeBadRequest)
	wantCode(api.EditRequest{Command: "insert", InsertLine: intp(1)}, api.CodeBadRequest)
	wantCode(api.EditRequest{Command: "insert", InsertLine: intp(4), NewStr: strp("x")}, api.CodeBadRange)
	wantCode(api.EditRequest{Command: "insert", InsertLine: intp(-1), NewStr: strp("x")}, api.CodeBadRange)
	mustEdit(api.EditRequest{Command: "insert", InsertLine: intp(0), NewStr: strp("# top")})
	mustEdit(api.EditRequest{Command: "insert", InsertLine: intp(4), NewStr: strp("# end\n# really")})
	mustEdit(api.EditRequest{Command: "insert", InsertLine: intp(2), NewStr: strp("mid = 1")})
	if file() != "# top\nb = 2\nmid = 1\nc = 30\nb = 40\n# end\n# really\n" {
		t.Fatalf("after inserts %q", file())
	}

	// undo_edit walks back through every edit, then has nothing left.
	for _, want := range []string{
		"# top\nb = 2\nc = 30\nb = 40\n# end\n# really\n",
		"# top\nb = 2\nc = 30\nb = 40\n",
		"b = 2\nc = 30\nb = 40\n",
		"a = 1\nb = 2\nc = 30\nb = 40\n",
		"a = 1\nb = 2\nc = 3\nb = 2\n",
	} {
		mustEdit(api.EditRequest{Command: "undo_edit"})
		if file() != want {
			t.Fatalf("undo: %q, want %q", file(), want)
		}
	}
	wantCode(api.EditRequest{Command: "undo_edit"}, api.CodeNoHistory)
	// Ten versions are kept per file.
	for i := 0; i < 12; i++ {
		mustEdit(api.EditRequest{Command: "insert", InsertLine: intp(0), NewStr: strp("x")})
	}
	for i := 0; i < 10; i++ {
		mustEdit(api.EditRequest{Command: "undo_edit"})
	}
	wantCode(api.EditRequest{Command: "undo_edit"}, api.CodeNoHistory)
	if !strings.HasPrefix(file(), "x\nx\na = 1") {
		t.Fatalf("after ten undos %q", file())
	}

	// Files the editor refuses.
	wantCode(api.EditRequest{Command: "view", Path: filepath.Join(dir, "missing")}, api.CodeNotFound)
	wantCode(api.EditRequest{Command: "str_replace", Path: filepath.Join(dir, "code"), OldStr: strp("a")}, api.CodeIsDirectory)
	bin := filepath.Join(dir, "blob")
	os.WriteFile(bin, []byte("abc\x00def"), 0o644)
	wantCode(api.EditRequest{Command: "view", Path: bin}, api.CodeBinary)
	wantCode(api.EditRequest{Command: "str_replace", Path: bin, OldStr: strp("abc"), NewStr: strp("x")}, api.CodeBinary)
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, bytes.Repeat([]byte("line\n"), 3<<20), 0o644)
	wantCode(api.EditRequest{Command: "view", Path: big}, api.CodeTooLarge)
	wantCode(api.EditRequest{Command: "bogus"}, api.CodeBadRequest)
	wantCode(api.EditRequest{}, api.CodeBadRequest)
}

// tarEntry describes one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, en := range entries {
		hdr := &tar.Header{Name: en.name, Typeflag: en.typ, Mode: en.mode, Linkname: en.link, Size: int64(len(en.body)), ModTime: time.Unix(1600000000, 0)}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if en.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if en.typ == tar.TypeReg {
			tw.Write([]byte(en.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func readTar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		desc := string(hdr.Typeflag) + ":" + string(body) + ":" + hdr.Linkname
		if hdr.Typeflag == tar.TypeReg {
			desc += ":" + fmt.Sprintf("%o", hdr.Mode&0o777)
		}
		out[hdr.Name] = desc
	}
}

func TestExecutorArchiveRoundTrip(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	dst := filepath.Join(t.TempDir(), "proj")
	in := makeTar(t, []tarEntry{
		{name: "src/", typ: tar.TypeDir, mode: 0o755},
		{name: "src/main.go", body: "package main\n", typ: tar.TypeReg},
		{name: "src/run.sh", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o755},
		{name: "deep/a/b/c.txt", body: "implicit parents", typ: tar.TypeReg},
		{name: "src/link", link: "main.go", typ: tar.TypeSymlink},
		{name: "src/hard", link: "src/main.go", typ: tar.TypeLink},
		{name: "./dot/x", body: "x", typ: tar.TypeReg},
	})
	res, err := e.client.PutArchive(ctx, dst, bytes.NewReader(in))
	if err != nil || res.Entries != 7 {
		t.Fatalf("put: %+v %v", res, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "src/run.sh")); err != nil || fi.Mode().Perm() != 0o755 || fi.ModTime().Unix() != 1600000000 {
		t.Fatalf("run.sh: %v %v", fi, err)
	}
	a, _ := os.Stat(filepath.Join(dst, "src/main.go"))
	h, _ := os.Stat(filepath.Join(dst, "src/hard"))
	if !os.SameFile(a, h) {
		t.Fatal("hard link not linked")
	}
	var out bytes.Buffer
	if _, err := e.client.GetArchive(ctx, dst, &out, 1<<20); err != nil {
		t.Fatal(err)
	}
	got := readTar(t, out.Bytes())
	want := map[string]string{
		"proj/":               "5::",
		"proj/src/":           "5::",
		"proj/src/main.go":    "0:package main\n::644",
		"proj/src/run.sh":     "0:#!/bin/sh\n::755",
		"proj/src/link":       "2::main.go",
		"proj/src/hard":       "0:package main\n::644",
		"proj/deep/":          "5::",
		"proj/deep/a/":        "5::",
		"proj/deep/a/b/":      "5::",
		"proj/deep/a/b/c.txt": "0:implicit parents::644",
		"proj/dot/":           "5::",
		"proj/dot/x":          "0:x::644",
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(got) != len(want) {
		t.Fatalf("archive entries %v", keys)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("entry %s = %q, want %q (all: %v)", k, got[k], v, keys)
		}
	}
	// A single file archives as one entry; a tar of it extracts elsewhere.
	out.Reset()
	if _, err := e.client.GetArchive(ctx, filepath.Join(dst, "src/main.go"), &out, 1<<20); err != nil {
		t.Fatal(err)
	}
	if g := readTar(t, out.Bytes()); len(g) != 1 || g["main.go"] != "0:package main\n::644" {
		t.Fatalf("file archive %v", g)
	}
	if _, err := e.client.GetArchive(ctx, filepath.Join(dst, "nope"), &out, 1<<20); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("archive of a missing path: %v", err)
	}
	// The size cap of the caller holds.
	if _, err := e.client.GetArchive(ctx, dst, io.Discard, 1000); err == nil {
		t.Fatal("archive over the cap succeeded")
	}
}

// TestExecutorArchiveRefusesHostileEntries: nothing may land outside the
// target directory, whatever the archive says.
func TestExecutorArchiveRefusesHostileEntries(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "victim"), []byte("intact"), 0o644)
	cases := []struct {
		name    string
		entries []tarEntry
		code    string
	}{
		{"absolute path", []tarEntry{{name: outside + "/abs", body: "x", typ: tar.TypeReg}}, api.CodeUnsafePath},
		{"dot-dot", []tarEntry{{name: "../outside/dotdot", body: "x", typ: tar.TypeReg}}, api.CodeUnsafePath},
		{"dot-dot inside", []tarEntry{{name: "a/../../outside/dotdot2", body: "x", typ: tar.TypeReg}}, api.CodeUnsafePath},
		{"through absolute symlink", []tarEntry{
			{name: "esc", link: outside, typ: tar.TypeSymlink},
			{name: "esc/through", body: "x", typ: tar.TypeReg},
		}, api.CodeUnsafePath},
		{"through relative symlink", []tarEntry{
			{name: "up", link: "../outside", typ: tar.TypeSymlink},
			{name: "up/through2", body: "x", typ: tar.TypeReg},
		}, api.CodeUnsafePath},
		{"overwrite through symlink", []tarEntry{
			{name: "v", link: outside + "/victim", typ: tar.TypeSymlink},
			{name: "v/", typ: tar.TypeDir},
		}, api.CodeUnsafePath},
		{"hard link to outside", []tarEntry{{name: "hl", link: "../outside/victim", typ: tar.TypeLink}}, api.CodeUnsafePath},
		{"hard link absolute", []tarEntry{{name: "hl2", link: outside + "/victim", typ: tar.TypeLink}}, api.CodeUnsafePath},
		{"hard link through symlink", []tarEntry{
			{name: "s", link: outside, typ: tar.TypeSymlink},
			{name: "hl3", link: "s/victim", typ: tar.TypeLink},
		}, api.CodeUnsafePath},
		{"device node", []tarEntry{{name: "null", typ: tar.TypeChar}}, api.CodeBadRequest},
		{"fifo", []tarEntry{{name: "fifo", typ: tar.TypeFifo}}, api.CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(base, "dst-"+strings.ReplaceAll(tc.name, " ", "-"))
			_, err := e.client.PutArchive(ctx, dst, bytes.NewReader(makeTar(t, tc.entries)))
			if !client.IsCode(err, tc.code) {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Fatalf("something landed outside: %v", ents)
			}
			if data, _ := os.ReadFile(filepath.Join(outside, "victim")); string(data) != "intact" {
				t.Fatalf("victim changed: %q", data)
			}
		})
	}
	// A file entry replaces a symlink instead of writing through it.
	dst := filepath.Join(base, "replace")
	_, err := e.client.PutArchive(ctx, dst, bytes.NewReader(makeTar(t, []tarEntry{
		{name: "v", link: outside + "/victim", typ: tar.TypeSymlink},
		{name: "v", body: "mine", typ: tar.TypeReg},
	})))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "victim")); string(data) != "intact" {
		t.Fatalf("victim written through a symlink: %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "v")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("v: %v %v", fi, err)
	}
	// Garbage is a clear error.
	if _, err := e.client.PutArchive(ctx, dst, strings.NewReader(strings.Repeat("not a tar", 100))); !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("garbage: %v", err)
	}
}
