package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
)

// ServerTestToken is the bearer token of the servers these tests start.
const ServerTestToken = "server-test-token-0123456789abcdef"

// ServerExecutorBin is the static executor binary the sandboxes run:
// $SBX_EXECUTOR_BIN, or "" for the one embedded in sbx.
func ServerExecutorBin() string {
	return os.Getenv("SBX_EXECUTOR_BIN")
}

// ExecutorBinaryFlag is sbx serve's --executor-binary for
// serverExecutorBin, when there is one.
func ExecutorBinaryFlag() []string {
	if p := ServerExecutorBin(); p != "" {
		return []string{"--executor-binary", p}
	}
	return nil
}

// ServerEnv is an in-process sbx server over a private state directory,
// on a loopback TCP port, with a Go client.
type ServerEnv struct {
	Dir, Root, RunRoot string
	Host               *sandbox.Host
	Srv                *server.Server
	HS                 *httptest.Server
	C                  *client.Client
	URL                string

	mu  sync.Mutex
	ids map[string]bool // every sandbox the test saw, for the leak check
}

// NewServerEnv starts a server over a Host of hcfg; its policy allows the
// fixture cache and the env's directory unless hcfg has one.
func NewServerEnv(t testing.TB, hcfg sandbox.HostConfig, mutate func(*server.Config)) *ServerEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxs")
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e := &ServerEnv{Dir: dir, Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), ids: map[string]bool{}}
	hcfg.Root, hcfg.RunRoot, hcfg.Executor = e.Root, e.RunRoot, ServerExecutorBin()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	hcfg.Logger = quiet
	if os.Getenv("SBX_TEST_LOG") != "" {
		hcfg.Logger = slog.Default()
	}
	if hcfg.Policy == nil {
		hcfg.Policy = &sbx.Policy{AllowedHostDirs: []string{fixture.CacheDir, dir}}
	}
	if hcfg.WatchInterval == 0 {
		hcfg.WatchInterval = 100 * time.Millisecond
	}
	if e.Host, err = sandbox.Open(hcfg); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{
		Backend:    e.Host,
		Background: e.Host,
		Token:      ServerTestToken,
		Logger:     quiet,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.Srv, err = server.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.HS = httptest.NewServer(e.Srv.Handler())
	e.URL = e.HS.URL
	if e.C, err = client.New(e.URL, client.Options{Token: ServerTestToken}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Srv.Shutdown()
		e.HS.Close()
		e.Srv.Close()
		ctx := context.Background()
		pools, _ := e.Host.ListPools(ctx)
		for _, p := range pools {
			if _, err := e.Host.RemovePool(ctx, p.Name); err != nil {
				t.Errorf("cleanup: remove pool %s: %v", p.Name, err)
			}
		}
		list, _ := e.Host.List(ctx, sbx.Filter{Pooled: true})
		for _, sb := range list {
			e.See(sb.ID)
			if err := e.Host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Errorf("cleanup: remove %s: %v", sb.ID, err)
			}
		}
		if _, err := e.Host.GC(ctx); err != nil {
			t.Errorf("cleanup: gc: %v", err)
		}
		_ = e.Host.Close()
		ServerAssertNoLeaks(t, e.RunRoot, e.Root, e.seen())
		_ = os.RemoveAll(dir)
	})
	return e
}

// See records a sandbox id for the leak check at the test's end.
func (e *ServerEnv) See(id string) {
	e.mu.Lock()
	e.ids[id] = true
	e.mu.Unlock()
}

// WaitPoolReady fills the pool name and waits until n of its members
// are ready, returning them (seen for the leak check). The server's
// background refill may fill the pool first (it looks at every pool at
// its start and every few seconds), so what FillPool itself started says
// nothing.
func (e *ServerEnv) WaitPoolReady(t testing.TB, name string, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Host.FillPool(ctx, name); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := e.C.GetPool(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range p.Ready {
			e.See(id)
		}
		if len(p.Ready) >= n {
			return p.Ready
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s: %d members not ready within 60 s", name, n)
		}
	}
}

// ServerAssertNoLeaks fails if anything of the sandboxes under runRoot and
// root is left: mounts (in any process), runtime and state directories,
// cgroups, processes.
func ServerAssertNoLeaks(t testing.TB, runRoot, root string, ids []string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if strings.Contains(string(data), runRoot) {
			comm, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			t.Errorf("leak: process %s (%q) sees a mount under %s", p, comm, runRoot)
		}
	}
	for _, d := range []string{filepath.Join(runRoot, "sandboxes"), filepath.Join(root, "sandboxes")} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("leak: %s still holds %v", d, names)
		}
	}
	left := cgroup.Leftovers()
	for _, id := range ids {
		if len(left[id]) > 0 {
			t.Errorf("leak: cgroups of sandbox %s: %v", id, left[id])
		}
	}
}

// RawCall sends one request with the test token and returns status and
// body.
func RawCall(t *testing.T, e *ServerEnv, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ServerTestToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// MustRaw is RawCall failing the test unless the status is want; it
// returns the body.
func MustRaw(t *testing.T, e *ServerEnv, want int, method, path, contentType string, body []byte) []byte {
	t.Helper()
	st, data := RawCall(t, e, method, path, contentType, body)
	if st != want {
		t.Fatalf("%s %s: HTTP %d %s, want %d", method, path, st, data, want)
	}
	return data
}

// DecodeJSON decodes data as JSON into a T, failing the test if it cannot.
func DecodeJSON[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

// BusyboxCreate is the options of a sandbox named name over the busybox
// fixture root.
func BusyboxCreate(name string) sbx.Options {
	return sbx.Options{Rootfs: fixture.CacheDir + "/busybox", Name: name}
}

// seen returns every sandbox id the test saw.
func (e *ServerEnv) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for id := range e.ids {
		out = append(out, id)
	}
	return out
}
