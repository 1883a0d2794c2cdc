package tests

import (
	"context"
	"io"
	"log/slog"
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

const serverTestToken = "server-test-token-0123456789abcdef"

// serverExecutorBin is the static executor binary the sandboxes run:
// $SBX_EXECUTOR_BIN, or "" for the one embedded in sbx.
func serverExecutorBin() string {
	return os.Getenv("SBX_EXECUTOR_BIN")
}

// executorBinaryFlag is sbx serve's --executor-binary for
// serverExecutorBin, when there is one.
func executorBinaryFlag() []string {
	if p := serverExecutorBin(); p != "" {
		return []string{"--executor-binary", p}
	}
	return nil
}

// serverEnv is an in-process sbx server over a private state directory,
// on a loopback TCP port, with a Go client.
type serverEnv struct {
	dir, root, runRoot string
	host               *sandbox.Host
	srv                *server.Server
	hs                 *httptest.Server
	c                  *client.Client
	url                string

	mu  sync.Mutex
	ids map[string]bool // every sandbox the test saw, for the leak check
}

// newServerEnv starts a server over a Host of hcfg; its policy allows the
// fixture cache and the env's directory unless hcfg has one.
func newServerEnv(t testing.TB, hcfg sandbox.HostConfig, mutate func(*server.Config)) *serverEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxs")
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e := &serverEnv{dir: dir, root: filepath.Join(dir, "root"), runRoot: filepath.Join(dir, "run"), ids: map[string]bool{}}
	hcfg.Root, hcfg.RunRoot, hcfg.Executor = e.root, e.runRoot, serverExecutorBin()
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
	if e.host, err = sandbox.Open(hcfg); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{
		Backend:    e.host,
		Background: e.host,
		Token:      serverTestToken,
		Logger:     quiet,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.srv, err = server.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.hs = httptest.NewServer(e.srv.Handler())
	e.url = e.hs.URL
	if e.c, err = client.New(e.url, client.Options{Token: serverTestToken}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.srv.Shutdown()
		e.hs.Close()
		e.srv.Close()
		ctx := context.Background()
		pools, _ := e.host.ListPools(ctx)
		for _, p := range pools {
			if _, err := e.host.RemovePool(ctx, p.Name); err != nil {
				t.Errorf("cleanup: remove pool %s: %v", p.Name, err)
			}
		}
		list, _ := e.host.List(ctx, sbx.Filter{Pooled: true})
		for _, sb := range list {
			e.see(sb.ID)
			if err := e.host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Errorf("cleanup: remove %s: %v", sb.ID, err)
			}
		}
		if _, err := e.host.GC(ctx); err != nil {
			t.Errorf("cleanup: gc: %v", err)
		}
		_ = e.host.Close()
		serverAssertNoLeaks(t, e.runRoot, e.root, e.seen())
		_ = os.RemoveAll(dir)
	})
	return e
}

func (e *serverEnv) see(id string) {
	e.mu.Lock()
	e.ids[id] = true
	e.mu.Unlock()
}

func (e *serverEnv) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for id := range e.ids {
		out = append(out, id)
	}
	return out
}

// serverAssertNoLeaks fails if anything of the sandboxes under runRoot and
// root is left: mounts (in any process), runtime and state directories,
// cgroups, processes.
func serverAssertNoLeaks(t testing.TB, runRoot, root string, ids []string) {
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
