package openhands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/openhands"
	"github.com/sbxrun/sbx/tests/fixture"
)

// fakeAgentServer stands in for an Agent Server, quick to boot, with the
// deferred-init contract of openhands-agent-server 1.58: GET /api/init
// says dormant when booted with OH_DEFERRED_INIT=true (404 in mode "old",
// as before deferred init); POST /api/init with X-Init-API-Key = its
// SESSION_API_KEY takes the session's keys and env (mode "good") or fails
// (mode "fail"); GET /api/whoami checks the session key and tells what the
// server's environment holds.
const fakeAgentServer = `
import http.server, json, os, sys
mode = sys.argv[1]
keys = [os.environ["SESSION_API_KEY"]]
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path == "/api/init":
            if mode == "old" or os.environ.get("OH_DEFERRED_INIT") != "true":
                return self.reply(404, {"detail": "Not Found"})
            return self.reply(200, {"state": "dormant", "error": None})
        if self.path == "/api/whoami":
            if self.headers.get("X-Session-API-Key") not in keys:
                return self.reply(401, {"detail": "bad key"})
            return self.reply(200, {k: os.environ.get(k, "") for k in ("OH_DEFERRED_INIT", "GREETING", "LLM_API_KEY", "OH_X")})
        return self.reply(200, {"status": "ok"})
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if mode != "good" or self.headers.get("X-Init-API-Key") != os.environ["SESSION_API_KEY"]:
            return self.reply(500, {"detail": "init broke"})
        keys[:] = req["session_api_keys"]
        os.environ.update(req.get("env", {}))
        return self.reply(200, {"state": "ready", "error": None})
http.server.ThreadingHTTPServer(("0.0.0.0", 60000), H).serve_forever()
`

const fakeImage = "sbx.test/openhands/fake:1"

// fakeStart is the start of a fake Agent Server in mode.
func fakeStart(mode, session string, env map[string]string) openhands.StartRequest {
	return openhands.StartRequest{Image: fakeImage, Command: openhands.Command{"python3", "-c", fakeAgentServer, mode},
		WorkingDir: "/tmp", Environment: env, SessionID: session}
}

// warmFakeEnv is a Host for the warm Agent Server tests, with the
// stand-in's image (fakeImage, Debian's root) imported: its state in a
// directory of its own (dir), its background work running until teardown
// (ctx), quiet unless SBX_TEST_LOG is set (log).
type warmFakeEnv struct {
	h    *sandbox.Host
	ctx  context.Context
	stop context.CancelFunc
	dir  string
	log  *slog.Logger
}

// newWarmFakeEnv makes a warmFakeEnv in a new directory named after
// prefix; netns, if not "", is the host stand-in its bridges join. Call
// teardown once the service over it is closed.
func newWarmFakeEnv(t *testing.T, prefix, netns string) *warmFakeEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e := &warmFakeEnv{dir: dir, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if os.Getenv("SBX_TEST_LOG") != "" {
		e.log = slog.Default()
	}
	cfg := sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		Executor: os.Getenv("SBX_EXECUTOR_BIN"), Pull: sbx.PullNever, Logger: e.log}
	if netns != "" {
		cfg.HostNetNS = "/run/netns/" + netns
	}
	if e.h, err = sandbox.Open(cfg); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	e.ctx, e.stop = context.WithCancel(context.Background())
	if err := e.h.StartBackground(e.ctx); err != nil {
		e.teardown(t)
		t.Fatal(err)
	}
	tarball := filepath.Join(dir, "debian.tar")
	if out, err := exec.Command("tar", "-C", fixture.DebianRootfs(t), "-cf", tarball, ".").CombinedOutput(); err != nil {
		e.teardown(t)
		t.Fatalf("tar the Debian root: %v\n%s", err, out)
	}
	if _, err := e.h.ImportImage(e.ctx, sbx.ImportOptions{Path: tarball, Name: fakeImage}); err != nil {
		e.teardown(t)
		t.Fatal(err)
	}
	os.Remove(tarball)
	return e
}

// teardown stops the Host's background work, removes its pools and what
// gc finds, closes it, checks that nothing is left and removes its
// directory.
func (e *warmFakeEnv) teardown(t *testing.T) {
	t.Helper()
	e.stop()
	ctx := context.Background()
	pools, _ := e.h.ListPools(ctx)
	for _, p := range pools {
		e.h.RemovePool(ctx, p.Name)
	}
	e.h.GC(ctx)
	e.h.Close()
	ohAssertNoLeftovers(t, e.dir)
	os.RemoveAll(e.dir)
}

// TestOpenHandsWarmFake drives the Runtime API's warm Agent Servers over
// a local host with a stand-in Agent Server (Debian's python): a dormant
// server boots with a key of its own and is handed the session (its keys,
// the request's per-session variables) by /api/init before /start
// replies; an init that fails removes the member and the start goes cold;
// a server without deferred init is kept warm by exact environment; the
// shape of a cold start is learned and its next start is warm; stop and
// close leave nothing.
func TestOpenHandsWarmFake(t *testing.T) {
	e := newWarmFakeEnv(t, "sbxohw", "")
	h, ctx, dir, quiet := e.h, e.ctx, e.dir, e.log

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shape := func(name, mode string, env map[string]string) openhands.WarmShape {
		return openhands.WarmShape{Name: name, StartRequest: fakeStart(mode, "", env)}
	}
	svc, err := openhands.New(h, openhands.Config{APIKey: "k", PublicURL: "http://" + ln.Addr().String(), StateDir: filepath.Join(dir, "oh"),
		Network: sbx.NetworkNone, Logger: quiet, ReadyTimeout: 2 * time.Minute,
		WarmPools: h, Warm: openhands.WarmConfig{Size: 1, Learn: 1, Shapes: []openhands.WarmShape{
			shape("good", "good", map[string]string{"OH_X": "1"}),
			shape("fail", "fail", nil),
			shape("old", "old", map[string]string{"GREETING": "hi"}),
		}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: svc.Handler()}
	go hs.Serve(ln)
	closed := false
	shutdown := func() {
		if !closed {
			closed = true
			hs.Close()
			svc.Close()
		}
	}
	defer func() {
		shutdown()
		e.teardown(t)
	}()

	waitShapes := func(what string, ok func(map[string]openhands.WarmRuntimeConfig) bool) map[string]openhands.WarmRuntimeConfig {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			m := map[string]openhands.WarmRuntimeConfig{}
			for _, c := range svc.WarmConfigs(ctx).Configs {
				m[c.Name] = c
			}
			if ok(m) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 3 minutes: %+v", what, m)
			}
		}
	}
	waitShapes("the configured shapes ready", func(m map[string]openhands.WarmRuntimeConfig) bool {
		return m["good"].Warm.Ready == 1 && m["good"].Warm.Deferred && m["fail"].Warm.Ready == 1 && m["old"].Warm.Ready == 1 && !m["old"].Warm.Deferred
	})
	whoami := func(rt openhands.Runtime, key string) (int, map[string]string) {
		t.Helper()
		req, _ := http.NewRequest("GET", rt.URL+"/api/whoami", nil)
		req.Header.Set("X-Session-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]string
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	waitRunning := func(session string) openhands.Runtime {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			rt, err := svc.Session(session)
			if err != nil || (rt.Status != openhands.StatusStarting && rt.Status != openhands.StatusRunning) {
				t.Fatalf("session %s: %+v %v", session, rt, err)
			}
			if rt.Status == openhands.StatusRunning {
				return rt
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s still starting", session)
			}
		}
	}
	fromPool := func(rt openhands.Runtime) string {
		sb, err := h.Get(ctx, rt.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		return sb.FromPool
	}

	// Deferred init: running before the reply, the member's key, the
	// per-session variable handed over by /api/init.
	good, err := svc.Start(fakeStart("good", "s-good", map[string]string{"OH_X": "1", "LLM_API_KEY": "secret-1"}))
	if err != nil || good.Status != openhands.StatusRunning || good.PodStatus != openhands.PodReady || len(good.SessionAPIKey) != 64 || fromPool(good) == "" {
		t.Fatalf("warm start: %+v %v", good, err)
	}
	if code, env := whoami(good, good.SessionAPIKey); code != 200 || env["OH_DEFERRED_INIT"] != "true" || env["LLM_API_KEY"] != "secret-1" || env["OH_X"] != "1" {
		t.Errorf("the warm Agent Server: %d %v", code, env)
	}
	if code, _ := whoami(good, "wrong"); code != http.StatusUnauthorized {
		t.Errorf("the warm Agent Server with a wrong key: %d", code)
	}
	// The pool refills with a member of another key.
	m := waitShapes("good refilled", func(m map[string]openhands.WarmRuntimeConfig) bool { return m["good"].Warm.Ready == 1 })
	if w := m["good"].Warm; w.Hits != 1 || w.InitFailures != 0 || w.LastBootS <= 0 {
		t.Errorf("good after a warm start: %+v", w)
	}
	good2, err := svc.Start(fakeStart("good", "s-good-2", map[string]string{"OH_X": "1", "LLM_API_KEY": "secret-2"}))
	if err != nil || good2.Status != openhands.StatusRunning || good2.SessionAPIKey == good.SessionAPIKey {
		t.Fatalf("second warm start: %+v %v", good2, err)
	}
	if code, env := whoami(good2, good2.SessionAPIKey); code != 200 || env["LLM_API_KEY"] != "secret-2" {
		t.Errorf("the second warm Agent Server: %d %v", code, env)
	}
	if code, _ := whoami(good2, good.SessionAPIKey); code != http.StatusUnauthorized {
		t.Errorf("the first session's key opens the second's Agent Server: %d", code)
	}
	// Pause, resume and stop as on a cold runtime.
	if rt, err := svc.Pause(ctx, good.RuntimeID); err != nil || rt.Status != openhands.StatusPaused {
		t.Fatalf("pause: %+v %v", rt, err)
	}
	if rt, err := svc.Resume(ctx, good.RuntimeID); err != nil || rt.Status != openhands.StatusRunning || rt.SessionAPIKey != good.SessionAPIKey {
		t.Fatalf("resume: %+v %v", rt, err)
	}
	if code, _ := whoami(good, good.SessionAPIKey); code != 200 {
		t.Errorf("after resume: %d", code)
	}

	// The init fails: that member goes, the start goes cold.
	fail, err := svc.Start(fakeStart("fail", "s-fail", nil))
	if err != nil || fail.Status != openhands.StatusStarting {
		t.Fatalf("start whose init fails: %+v %v", fail, err)
	}
	if fail = waitRunning("s-fail"); fromPool(fail) != "" {
		t.Errorf("the cold start came from pool %q", fromPool(fail))
	}
	if code, env := whoami(fail, fail.SessionAPIKey); code != 200 || env["OH_DEFERRED_INIT"] != "" {
		t.Errorf("the cold Agent Server: %d %v", code, env)
	}

	// No deferred init: exact environment.
	old, err := svc.Start(fakeStart("old", "s-old", map[string]string{"GREETING": "hi"}))
	if err != nil || old.Status != openhands.StatusRunning || fromPool(old) == "" {
		t.Fatalf("start of an exact-environment shape: %+v %v", old, err)
	}
	if code, env := whoami(old, old.SessionAPIKey); code != 200 || env["GREETING"] != "hi" || env["OH_DEFERRED_INIT"] != "" {
		t.Errorf("the exact-environment Agent Server: %d %v", code, env)
	}
	// Another environment is another shape: cold, and learned.
	other := fakeStart("good", "s-learn-1", map[string]string{"OH_X": "2"})
	if rt, err := svc.Start(other); err != nil || rt.Status != openhands.StatusStarting {
		t.Fatalf("start of an unknown shape: %+v %v", rt, err)
	}
	waitRunning("s-learn-1")
	waitShapes("the learned shape ready", func(m map[string]openhands.WarmRuntimeConfig) bool {
		for _, c := range m {
			if c.Warm.Learned && c.Warm.Ready == 1 && c.Environment["OH_X"] == "2" {
				return true
			}
		}
		return false
	})
	other.SessionID = "s-learn-2"
	learned, err := svc.Start(other)
	if err != nil || learned.Status != openhands.StatusRunning {
		t.Fatalf("start of a learned shape: %+v %v", learned, err)
	}
	m = waitShapes("counts", func(map[string]openhands.WarmRuntimeConfig) bool { return true })
	if w := m["fail"].Warm; w.InitFailures != 1 || w.Hits != 0 {
		t.Errorf("fail: %+v", w)
	}
	if w := m["old"].Warm; w.Hits != 1 {
		t.Errorf("old: %+v", w)
	}
	stats := h.PoolStats()[m["good"].Warm.Pool]
	if stats.Hits != 2 || stats.Boots < 3 {
		t.Errorf("the host's stats of good's pool: %+v", stats)
	}
	for _, s := range []string{"s-good", "s-good-2", "s-fail", "s-old", "s-learn-1", "s-learn-2"} {
		rt, _ := svc.Session(s)
		if _, err := svc.Stop(ctx, rt.RuntimeID); err != nil {
			t.Errorf("stop %s: %v", s, err)
		}
	}
	// Closing the service removes its pools and their dormant servers.
	shutdown()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		list, err := h.List(ctx, sbx.Filter{Pooled: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes left after stops and close: %d", len(list))
		}
	}
	if pools, _ := h.ListPools(ctx); len(pools) != 0 {
		t.Errorf("pools left after close: %v", fmt.Sprint(pools))
	}
}
