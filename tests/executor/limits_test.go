package executor

import (
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

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

// TestExecutorOutputBudgetBoundsMemory: many commands flooding output at
// once hold no more than the executor's output budget; the ones that find
// it used up say their output was truncated.
func TestExecutorOutputBudgetBoundsMemory(t *testing.T) {
	e := startExecutor(t, "--output-budget", "8388608")
	ctx := harness.Context(t)
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
				Timeout:        2 * time.Minute,
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
