package tests

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
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

// treeSnapshot describes every entry below dir: type, mode, content or
// link target.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			desc += " " + string(data)
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			desc += " -> " + l
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExecutorArchiveAllOrNothing: an archive refused part-way changes
// nothing, whatever its good entries before the bad one did.
func TestExecutorArchiveAllOrNothing(t *testing.T) {
	e := startExecutor(t)
	ctx := ctxT(t)
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

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}

// rawRequest sends one HTTP request to the executor's socket.
func rawRequest(t *testing.T, sock, method, path, body string) (*http.Response, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://executor"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// TestExecutorWrongMethodAndSignalField: a known path with the wrong
// method is 405 with Allow; an unknown path is 404; an exec reply always
// carries "signal".
func TestExecutorWrongMethodAndSignalField(t *testing.T) {
	e := startExecutor(t)
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, api.PathExec, "POST"},
		{http.MethodDelete, api.PathFiles, "GET, PUT"},
		{http.MethodPost, api.PathHealth, "GET"},
		{http.MethodGet, api.PathSessions + "/abc/run", "POST"},
	} {
		resp, body := rawRequest(t, e.socket, c.method, c.path, "")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || !strings.Contains(body, api.CodeMethodNotAllowed) {
			t.Fatalf("%s %s: %d Allow=%q %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if resp, body := rawRequest(t, e.socket, http.MethodGet, "/v1/nothing-here", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, body)
	}
	resp, body := rawRequest(t, e.socket, http.MethodPost, api.PathExec, `{"argv":["true"]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"signal":""`) {
		t.Fatalf("exec reply without signal: %d %s", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, e.socket, http.MethodPost, api.PathExec, `{"command":"kill -9 $$"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"signal":"SIGKILL"`) {
		t.Fatalf("exec reply of a killed command: %d %s", resp.StatusCode, body)
	}
}

// TestExecutorOutputBudgetBoundsMemory: many commands flooding output at
// once hold no more than the executor's output budget; the ones that find
// it used up say their output was truncated.
func TestExecutorOutputBudgetBoundsMemory(t *testing.T) {
	e := startExecutor(t, "--output-budget", "8388608")
	ctx := ctxT(t)
	const n = 12
	var wg sync.WaitGroup
	results := make([]api.ExecResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.client.Exec(ctx, api.ExecRequest{
				Command:        "head -c 20000000 /dev/zero | tr '\\0' x; sleep 2; echo end",
				MaxOutputBytes: 8 << 20,
				TimeoutS:       120,
			})
		}()
	}
	// Sample the executor's memory while the commands hold their output.
	var peak int64
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, vmRSS(t, e.pid()))
		}
	}
	budgetNotes := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("exec %d: %v", i, errs[i])
		}
		if !results[i].Truncated {
			t.Fatalf("exec %d of 20 MB is not truncated", i)
		}
		if strings.Contains(results[i].Stdout, "output memory is used up") {
			budgetNotes++
		}
	}
	t.Logf("peak executor RSS %d MiB; %d of %d commands hit the budget", peak>>20, budgetNotes, n)
	if budgetNotes == 0 {
		t.Fatal("no command hit the 8 MiB budget although together they printed 240 MB into 8 MiB buffers")
	}
	// Unbounded, the buffers alone would hold 12 x 12 MiB.
	if peak > 80<<20 {
		t.Fatalf("executor RSS peaked at %d MiB with an 8 MiB output budget", peak>>20)
	}
	// The memory comes back: a later command gets its full output.
	res, err := e.client.Exec(ctx, api.ExecRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' y", MaxOutputBytes: 4 << 20})
	if err != nil || res.Truncated || len(res.Stdout) != 3000000 {
		t.Fatalf("after the flood: truncated=%v len=%d %v", res.Truncated, len(res.Stdout), err)
	}
}

// TestExecutorSessionSurvivesPromptChanges: commands that replace the
// prompt (rc files, PS1, PROMPT_COMMAND) or the shell itself (exec) leave
// the session working, with exit codes and the working directory right.
func TestExecutorSessionSurvivesPromptChanges(t *testing.T) {
	e := startExecutor(t)
	home := t.TempDir()
	skel, err := os.ReadFile("/etc/skel/.bashrc")
	if err != nil {
		t.Fatalf("Debian's /etc/skel/.bashrc is needed: %v", err)
	}
	os.WriteFile(filepath.Join(home, ".bashrc"), skel, 0o644)
	rc := filepath.Join(home, "rc")
	os.WriteFile(rc, []byte("PS1='custom> '\nPS2='more> '\nPROMPT_COMMAND='PS1=z'\n"), 0o644)
	for _, sh := range []struct{ name, spec, exec string }{
		{"bash", "bash", "exec bash"},
		{"busybox", "/usr/bin/busybox sh", "exec /usr/bin/busybox sh"},
	} {
		t.Run(sh.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSession(t, e.client, api.SessionRequest{Shell: sh.spec, Cwd: dir, Env: map[string]string{"HOME": home}})
			cmds := []string{"PS1=x", "PS1='$ '; PS2='> '", "PROMPT_COMMAND='PS1=y'", ". " + rc, "source " + rc + " 2>/dev/null || . " + rc}
			if sh.name == "bash" {
				cmds = append(cmds, "source /etc/bash.bashrc", "source ~/.bashrc", "PROMPT_COMMAND=(PS1=w)")
			}
			for _, c := range cmds {
				s.ok(c)
				wantOutput(t, "after "+c, s.ok("echo alive"), "alive\n")
			}
			// The exit code is the command's, also when it set the prompt;
			// $? in the next command is the last command's.
			if res := s.run(api.RunRequest{Command: "PS1=q; (exit 4)"}); res.Status != api.StatusCompleted || *res.ExitCode != 4 {
				t.Fatalf("exit code after PS1=q: %+v", res)
			}
			wantOutput(t, "$? carried over", s.ok("echo $?"), "4\n")
			// exec replaces the shell; the new one answers as well.
			s.ok("cd " + dir + " && export KEEP=kept")
			if res := s.run(api.RunRequest{Command: sh.exec, TimeoutS: 20}); res.Status != api.StatusCompleted || *res.ExitCode != 0 {
				t.Fatalf("%s: %+v", sh.exec, res)
			}
			wantOutput(t, "after "+sh.exec, s.ok(`echo "$KEEP $((2+3))"`), "kept 5\n")
			res := s.run(api.RunRequest{Command: "mkdir -p x && cd x && (exit 2)"})
			if res.Status != api.StatusCompleted || *res.ExitCode != 2 || res.Cwd != dir+"/x" {
				t.Fatalf("after exec: %+v", res)
			}
			// And a prompt change in the new shell is survived too.
			s.ok("PS1=again")
			wantOutput(t, "after exec and PS1", s.ok("echo fine"), "fine\n")
		})
	}
	// A bash started by exec uses readline; with a real TERM its escapes
	// must not reach the output.
	s := newSession(t, e.client, api.SessionRequest{Shell: "bash", Env: map[string]string{"HOME": home, "TERM": "xterm"}})
	s.ok("exec bash")
	wantOutput(t, "exec bash with TERM=xterm", s.ok("echo clean; false || true"), "clean\n")
	if res := s.run(api.RunRequest{Command: "(exit 9)"}); *res.ExitCode != 9 || res.Output != "" {
		t.Fatalf("exit code in the exec'd bash: %+v", res)
	}
}
