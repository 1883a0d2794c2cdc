package fileops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxrun/sbx/executor/api"
)

func ptr[T any](v T) *T { return &v }

// newFiles returns a Files working in a fresh directory, for the current
// user (no root needed: chown only happens as root).
func newFiles(t *testing.T) (*Files, string) {
	t.Helper()
	dir := t.TempDir()
	return New(os.Getuid(), os.Getgid(), dir, 1<<20), dir
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// code returns the API error code of err ("" for nil or a plain error).
func code(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

// TestEditCommands drives each editor command through Edit against a real
// file: what it writes, what it replies, and the API error code of each
// refusal, which must leave the file as it was.
func TestEditCommands(t *testing.T) {
	const start = "alpha\nbeta\ngamma\nbeta\n"
	cases := []struct {
		name     string
		req      api.EditRequest
		wantCode string // "" means success
		want     string // the file afterwards ("" with wantCode: unchanged)
		out      []string
	}{
		{name: "view whole file", req: api.EditRequest{Command: api.EditView},
			out: []string{"     1\talpha\n", "     4\tbeta\n"}},
		{name: "view range", req: api.EditRequest{Command: api.EditView, ViewRange: []int{2, 3}},
			out: []string{"     2\tbeta\n     3\tgamma\n"}},
		{name: "view range to the end", req: api.EditRequest{Command: api.EditView, ViewRange: []int{3, -1}},
			out: []string{"     3\tgamma\n     4\tbeta\n"}},
		{name: "view range first line out of bounds", req: api.EditRequest{Command: api.EditView, ViewRange: []int{0, 2}}, wantCode: api.CodeBadRange},
		{name: "view range past the end", req: api.EditRequest{Command: api.EditView, ViewRange: []int{2, 9}}, wantCode: api.CodeBadRange},
		{name: "view range backwards", req: api.EditRequest{Command: api.EditView, ViewRange: []int{3, 2}}, wantCode: api.CodeBadRange},
		{name: "view range of one number", req: api.EditRequest{Command: api.EditView, ViewRange: []int{2}}, wantCode: api.CodeBadRange},
		{name: "str_replace unique", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr("gamma"), NewStr: ptr("GAMMA\ndelta")},
			want: "alpha\nbeta\nGAMMA\ndelta\nbeta\n", out: []string{"edited ", "     3\tGAMMA\n     4\tdelta\n"}},
		{name: "str_replace with nothing deletes", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr("alpha\n")},
			want: "beta\ngamma\nbeta\n"},
		{name: "str_replace ambiguous", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr("beta"), NewStr: ptr("b")}, wantCode: api.CodeMultiMatch},
		{name: "str_replace missing", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr("omega"), NewStr: ptr("o")}, wantCode: api.CodeNoMatch},
		{name: "str_replace empty old_str", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr(""), NewStr: ptr("x")}, wantCode: api.CodeBadRequest},
		{name: "str_replace without old_str", req: api.EditRequest{Command: api.EditStrReplace, NewStr: ptr("x")}, wantCode: api.CodeBadRequest},
		{name: "str_replace same text", req: api.EditRequest{Command: api.EditStrReplace, OldStr: ptr("gamma"), NewStr: ptr("gamma")}, wantCode: api.CodeBadRequest},
		{name: "insert at the top", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(0), NewStr: ptr("zero")},
			want: "zero\nalpha\nbeta\ngamma\nbeta\n"},
		{name: "insert in the middle, two lines", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(2), NewStr: ptr("x\ny")},
			want: "alpha\nbeta\nx\ny\ngamma\nbeta\n", out: []string{"     3\tx\n     4\ty\n"}},
		{name: "insert at the end", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(4), NewStr: ptr("omega")},
			want: start + "omega\n"},
		{name: "insert an empty line", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(1), NewStr: ptr("")},
			want: "alpha\n\nbeta\ngamma\nbeta\n"},
		{name: "insert past the end", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(5), NewStr: ptr("x")}, wantCode: api.CodeBadRange},
		{name: "insert before the start", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(-1), NewStr: ptr("x")}, wantCode: api.CodeBadRange},
		{name: "insert without a line", req: api.EditRequest{Command: api.EditInsert, NewStr: ptr("x")}, wantCode: api.CodeBadRequest},
		{name: "insert without text", req: api.EditRequest{Command: api.EditInsert, InsertLine: ptr(1)}, wantCode: api.CodeBadRequest},
		{name: "create over an existing file", req: api.EditRequest{Command: api.EditCreate, FileText: ptr("new")}, wantCode: api.CodeExists},
		{name: "undo without history", req: api.EditRequest{Command: api.EditUndo}, wantCode: api.CodeNoHistory},
		{name: "no command", req: api.EditRequest{}, wantCode: api.CodeBadRequest},
		{name: "unknown command", req: api.EditRequest{Command: "rewrite"}, wantCode: api.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, dir := newFiles(t)
			p := filepath.Join(dir, "f.txt")
			writeFile(t, p, start, 0o640)
			c.req.Path = "f.txt" // relative to the working directory
			res, err := f.Edit(c.req)
			if c.wantCode != "" {
				if code(err) != c.wantCode {
					t.Fatalf("error %v (code %q), want code %q", err, code(err), c.wantCode)
				}
				if got := readFile(t, p); got != start {
					t.Fatalf("a refused edit changed the file: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != p {
				t.Errorf("path %q, want %q", res.Path, p)
			}
			want := c.want
			if want == "" {
				want = start
			}
			if got := readFile(t, p); got != want {
				t.Errorf("file is %q, want %q", got, want)
			}
			for _, o := range c.out {
				if !strings.Contains(res.Output, o) {
					t.Errorf("output %q lacks %q", res.Output, o)
				}
			}
			// An edit keeps the file's mode.
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode after the edit: %v %v", fi.Mode(), err)
			}
		})
	}
}

// TestEditMultiMatchLines: an ambiguous str_replace names every line the
// text appears on, so an agent can add context.
func TestEditMultiMatchLines(t *testing.T) {
	f, dir := newFiles(t)
	writeFile(t, filepath.Join(dir, "f"), "x\nfoo\ny\nfoo bar foo\n", 0o644)
	_, err := f.Edit(api.EditRequest{Command: api.EditStrReplace, Path: "f", OldStr: ptr("foo"), NewStr: ptr("baz")})
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != api.CodeMultiMatch {
		t.Fatalf("err %v", err)
	}
	if want := []int{2, 4, 4}; len(fe.Lines) != 3 || fe.Lines[0] != want[0] || fe.Lines[1] != want[1] || fe.Lines[2] != want[2] {
		t.Errorf("lines %v, want %v", fe.Lines, want)
	}
}

// TestEditCreateAndUndo: create makes parents and never overwrites; every
// edit can be undone in reverse order, and undo restores exactly.
func TestEditCreateAndUndo(t *testing.T) {
	f, dir := newFiles(t)
	p := filepath.Join(dir, "a", "b", "new.py")
	res, err := f.Edit(api.EditRequest{Command: api.EditCreate, Path: p, FileText: ptr("one\ntwo\n")})
	if err != nil || !strings.Contains(res.Output, "created "+p+" (2 lines)") {
		t.Fatalf("create: %q %v", res.Output, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("created file: %v %v", fi, err)
	}
	if _, err := f.Edit(api.EditRequest{Command: api.EditCreate, Path: p}); code(err) != api.CodeBadRequest {
		t.Fatalf("create without file_text: %v", err)
	}
	steps := []api.EditRequest{
		{Command: api.EditStrReplace, Path: p, OldStr: ptr("one"), NewStr: ptr("ONE")},
		{Command: api.EditInsert, Path: p, InsertLine: ptr(2), NewStr: ptr("three")},
		{Command: api.EditStrReplace, Path: p, OldStr: ptr("two\n")},
	}
	versions := []string{readFile(t, p)}
	for _, s := range steps {
		if _, err := f.Edit(s); err != nil {
			t.Fatalf("%s: %v", s.Command, err)
		}
		versions = append(versions, readFile(t, p))
	}
	if versions[3] != "ONE\nthree\n" {
		t.Fatalf("after the edits: %q", versions[3])
	}
	for i := len(versions) - 2; i >= 0; i-- {
		res, err := f.Edit(api.EditRequest{Command: api.EditUndo, Path: p})
		if err != nil {
			t.Fatalf("undo %d: %v", i, err)
		}
		if got := readFile(t, p); got != versions[i] {
			t.Fatalf("undo %d restored %q, want %q", i, got, versions[i])
		}
		if !strings.HasPrefix(res.Output, "restored the previous version of "+p) {
			t.Errorf("undo reply %q", res.Output)
		}
	}
	// Create is not an edit: nothing is left to undo.
	if _, err := f.Edit(api.EditRequest{Command: api.EditUndo, Path: p}); code(err) != api.CodeNoHistory {
		t.Fatalf("undo past the first edit: %v", err)
	}
}

// TestEditHistoryBounds: undo keeps at most HistoryPerFile versions per
// file, and the byte budget drops the oldest versions of any file first.
func TestEditHistoryBounds(t *testing.T) {
	f, dir := newFiles(t)
	p := filepath.Join(dir, "f")
	writeFile(t, p, "v\n", 0o644)
	cur := "v"
	for range HistoryPerFile + 5 {
		if _, err := f.Edit(api.EditRequest{Command: api.EditStrReplace, Path: p, OldStr: ptr(cur), NewStr: ptr(cur + "x")}); err != nil {
			t.Fatal(err)
		}
		cur += "x"
	}
	undos := 0
	for {
		if _, err := f.Edit(api.EditRequest{Command: api.EditUndo, Path: p}); err != nil {
			if code(err) != api.CodeNoHistory {
				t.Fatal(err)
			}
			break
		}
		undos++
	}
	if undos != HistoryPerFile {
		t.Errorf("%d undos kept, want %d", undos, HistoryPerFile)
	}

	// A budget of 10 bytes keeps only the newest versions that fit.
	h := history{budget: 10}
	h.push("a", "12345")
	h.push("b", "678")
	h.push("a", "abcd")
	if _, ok := h.pop("b"); !ok {
		t.Error("b's version was dropped, though it fits")
	}
	if v, ok := h.pop("a"); !ok || v != "abcd" {
		t.Errorf("a's newest version: %q %v", v, ok)
	}
	if _, ok := h.pop("a"); ok {
		t.Error("a's oldest version was kept past the budget")
	}
	if h.total != 0 || len(h.entries) != 0 {
		t.Errorf("history not empty: %d bytes, %d entries", h.total, len(h.entries))
	}
}

// TestEditRefusesWhatIsNotText: the editor reads only regular UTF-8 files
// without NUL bytes, up to MaxTextBytes; a directory is listed by view.
func TestEditRefusesWhatIsNotText(t *testing.T) {
	f, dir := newFiles(t)
	writeFile(t, filepath.Join(dir, "bin"), "ab\x00cd", 0o644)
	writeFile(t, filepath.Join(dir, "latin1"), "caf\xe9\n", 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxTextBytes + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	for _, c := range []struct{ path, code string }{
		{"bin", api.CodeBinary},
		{"latin1", api.CodeBinary},
		{"fifo", api.CodeNotRegular}, // must not block
		{"big", api.CodeTooLarge},
		{"missing", api.CodeNotFound},
		{"bin/below", api.CodeNotFound},
	} {
		if _, err := f.Edit(api.EditRequest{Command: api.EditView, Path: c.path}); code(err) != c.code {
			t.Errorf("view %s: %v, want code %s", c.path, err, c.code)
		}
		if _, err := f.Edit(api.EditRequest{Command: api.EditStrReplace, Path: c.path, OldStr: ptr("a"), NewStr: ptr("b")}); code(err) != c.code {
			t.Errorf("str_replace %s: %v, want code %s", c.path, err, c.code)
		}
	}
	if _, err := f.Edit(api.EditRequest{Command: api.EditView, Path: ""}); code(err) != api.CodeBadRequest {
		t.Errorf("empty path: %v", err)
	}
	if _, err := f.Edit(api.EditRequest{Command: api.EditView, Path: "a\x00b"}); code(err) != api.CodeBadRequest {
		t.Errorf("path with NUL: %v", err)
	}
}

// TestEditViewDirectory lists two levels, hidden entries counted, not shown.
func TestEditViewDirectory(t *testing.T) {
	f, dir := newFiles(t)
	for _, p := range []string{"a.txt", "sub/b.txt", "sub/deep/c.txt", ".hidden", ".git/config"} {
		writeFile(t, filepath.Join(dir, p), "x\n", 0o644)
	}
	res, err := f.Edit(api.EditRequest{Command: api.EditView, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{dir + "/a.txt", dir + "/sub/", dir + "/sub/b.txt", dir + "/sub/deep/"}, "\n") + "\n[2 hidden entries excluded]\n"
	if res.Output != want {
		t.Errorf("view of a directory:\n%s\nwant:\n%s", res.Output, want)
	}
	if _, err := f.Edit(api.EditRequest{Command: api.EditView, Path: dir, ViewRange: []int{1, 2}}); code(err) != api.CodeBadRange {
		t.Errorf("view_range on a directory: %v", err)
	}
}

// TestEditViewClips long output at maxViewBytes on a line boundary.
func TestEditViewClips(t *testing.T) {
	f, dir := newFiles(t)
	line := strings.Repeat("y", 99) + "\n"
	writeFile(t, filepath.Join(dir, "long"), strings.Repeat(line, 2000), 0o644)
	res, err := f.Edit(api.EditRequest{Command: api.EditView, Path: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) > maxViewBytes+100 || !strings.HasSuffix(res.Output, "[output clipped; use view_range to see the rest of the file]\n") {
		t.Errorf("view of 2,000 lines: %d bytes, ends %q", len(res.Output), res.Output[len(res.Output)-80:])
	}
	body := strings.TrimSuffix(res.Output, "[output clipped; use view_range to see the rest of the file]\n")
	if !strings.HasSuffix(body, "\n") || strings.Count(body, "\n") != strings.Count(body, "\t") {
		t.Error("the clip cut a line")
	}
}

// TestEditKeepsNoNewlineAtEnd: a file without a final newline keeps none.
func TestEditKeepsNoNewlineAtEnd(t *testing.T) {
	f, dir := newFiles(t)
	p := filepath.Join(dir, "f")
	writeFile(t, p, "a\nb", 0o644)
	if _, err := f.Edit(api.EditRequest{Command: api.EditInsert, Path: p, InsertLine: ptr(1), NewStr: ptr("x")}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, p); got != "a\nx\nb" {
		t.Errorf("insert into a file without a final newline: %q", got)
	}
	e := filepath.Join(dir, "empty")
	writeFile(t, e, "", 0o644)
	if _, err := f.Edit(api.EditRequest{Command: api.EditInsert, Path: e, InsertLine: ptr(0), NewStr: ptr("first")}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, e); got != "first\n" {
		t.Errorf("insert into an empty file: %q", got)
	}
}

// TestEditReplacesSymlinkNotTarget: writes replace the path atomically; a
// symlink at the path is replaced, its target left alone.
func TestEditReplacesSymlinkNotTarget(t *testing.T) {
	f, dir := newFiles(t)
	target := filepath.Join(dir, "target")
	writeFile(t, target, "keep\n", 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Edit(api.EditRequest{Command: api.EditStrReplace, Path: link, OldStr: ptr("keep"), NewStr: ptr("changed")}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "keep\n" {
		t.Errorf("the symlink's target was written: %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() || readFile(t, link) != "changed\n" {
		t.Errorf("the link was not replaced by the edited file: %v %v", fi, err)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".sbx-write-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestReadLines returns 1-based inclusive ranges and refuses ranges outside
// the file.
func TestReadLines(t *testing.T) {
	f, dir := newFiles(t)
	p := filepath.Join(dir, "f")
	writeFile(t, p, "1\n2\n3\n", 0o644)
	for _, c := range []struct {
		start, end int
		want, code string
	}{
		{1, 0, "1\n2\n3\n", ""},
		{2, 2, "2\n", ""},
		{2, 99, "2\n3\n", ""},
		{0, 1, "1\n", ""},
		{4, 0, "", api.CodeBadRange},
		{3, 2, "", api.CodeBadRange},
	} {
		got, err := f.ReadLines(p, c.start, c.end)
		if code(err) != c.code || (c.code == "" && (err != nil || string(got) != c.want)) {
			t.Errorf("lines %d-%d: %q %v, want %q code %q", c.start, c.end, got, err, c.want, c.code)
		}
	}
	e := filepath.Join(dir, "empty")
	writeFile(t, e, "", 0o644)
	if got, err := f.ReadLines(e, 1, 0); err != nil || len(got) != 0 {
		t.Errorf("lines of an empty file: %q %v", got, err)
	}
}
