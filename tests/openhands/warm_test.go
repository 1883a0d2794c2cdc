package openhands_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeAgentServer is a stand-in Agent Server for the fallbacks of warm
// starts, quick to boot: GET /api/init says dormant when booted with
// OH_DEFERRED_INIT=true (mode "fail"), or 404 as Agent Servers before
// deferred init do (mode "old"); POST /api/init fails; GET /api/whoami
// checks the session key and tells the boot environment; everything else
// answers ok.
const fakeAgentServer = `
import http.server, json, os, sys
mode = sys.argv[1]
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
            if self.headers.get("X-Session-API-Key") != os.environ["SESSION_API_KEY"]:
                return self.reply(401, {"detail": "bad key"})
            return self.reply(200, {"deferred": os.environ.get("OH_DEFERRED_INIT", ""), "greeting": os.environ.get("GREETING", "")})
        return self.reply(200, {"status": "ok"})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return self.reply(500, {"detail": "init broke"})
http.server.ThreadingHTTPServer(("0.0.0.0", 60000), H).serve_forever()
`

// fakeStart is the start of a fake Agent Server in mode.
func fakeStart(mode string, env map[string]string) map[string]any {
	return map[string]any{"image": ohAskedImage, "command": []string{"python3", "-c", fakeAgentServer, mode},
		"working_dir": "/tmp", "environment": env}
}

// ohWarmFlags are sbx serve's flags for warm Agent Servers in the test:
// one per shape, the shapes of three recent starts learned, and the two
// fake shapes configured.
func ohWarmFlags(t testing.TB) []string {
	t.Helper()
	conf := map[string]any{"configs": []map[string]any{
		withName("fake-init-fails", fakeStart("fail", map[string]string{})),
		withName("fake-old", fakeStart("old", map[string]string{"GREETING": "hi"})),
	}}
	data, _ := json.Marshal(conf)
	f, err := os.CreateTemp("", "sbxoh-warm-*.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return []string{"--openhands-warm", "1", "--openhands-warm-learn", "3", "--openhands-warm-config", f.Name()}
}

func withName(name string, m map[string]any) map[string]any {
	m["name"] = name
	return m
}

// warmConfig is one element of GET /api/warm-runtime-configs.
type warmConfig struct {
	Name        string            `json:"name"`
	Image       string            `json:"image"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	WorkingDir  string            `json:"working_dir"`
	Warm        struct {
		Pool         string  `json:"pool"`
		Ready        int     `json:"ready"`
		Deferred     bool    `json:"deferred_init"`
		Learned      bool    `json:"learned"`
		Hits         int     `json:"hits"`
		Misses       int     `json:"misses"`
		InitFailures int     `json:"init_failures"`
		LastBootS    float64 `json:"last_boot_seconds"`
		LastError    string  `json:"last_error"`
	} `json:"sbx_warm"`
}

func (e *ohEnv) warmConfigs(t testing.TB) map[string]warmConfig {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/api/warm-runtime-configs", nil)
	req.Header.Set("X-API-Key", e.key)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Configs []warmConfig `json:"configs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/warm-runtime-configs: %d %v", resp.StatusCode, err)
	}
	m := map[string]warmConfig{}
	for _, c := range out.Configs {
		m[c.Name] = c
	}
	return m
}

// waitWarm polls the warm shapes until ok says so (up to limit).
func (e *ohEnv) waitWarm(t testing.TB, limit time.Duration, what string, ok func(map[string]warmConfig) bool) map[string]warmConfig {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c := e.warmConfigs(t)
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; warm shapes: %+v", what, limit, c)
		}
		time.Sleep(time.Second)
	}
}

// agentCall calls the Agent Server of runtime rt through the data plane.
func (e *ohEnv) agentCall(t testing.TB, rt map[string]any, method, path, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, rt["url"].(string)+path, nil)
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// testOHWarmFallbacks: a dormant server that refuses /api/init is removed
// and the start goes cold; an Agent Server without deferred init is kept
// warm by exact environment and handed out as it booted.
func testOHWarmFallbacks(t *testing.T, e *ohEnv) {
	c := e.waitWarm(t, 5*time.Minute, "the fake shapes ready", func(c map[string]warmConfig) bool {
		return c["fake-init-fails"].Warm.Ready >= 1 && c["fake-init-fails"].Warm.Deferred &&
			c["fake-old"].Warm.Ready >= 1 && !c["fake-old"].Warm.Deferred
	})
	if got := c["fake-old"]; got.Environment["GREETING"] != "hi" || got.Image != ohAskedImage || got.WorkingDir != "/tmp" {
		t.Errorf("warm-runtime-configs of fake-old: %+v", got)
	}

	// The init fails: that member is removed, the start goes cold.
	req := fakeStart("fail", map[string]string{})
	req["session_id"] = "warm-fail-1"
	code, rt := e.api(t, "POST", "/start", req)
	if code != 200 || rt["status"] != "starting" {
		t.Fatalf("start whose init fails: %d %v", code, rt)
	}
	if rt = e.waitRuntime(t, "warm-fail-1"); rt["status"] != "running" {
		t.Fatalf("cold start after a failed init: %v", rt)
	}
	if sb, err := e.host.Get(t.Context(), rt["sandbox_id"].(string)); err != nil || sb.FromPool != "" {
		t.Errorf("the cold start's sandbox: from pool %q, %v", sb.FromPool, err)
	}
	if w := e.warmConfigs(t)["fake-init-fails"].Warm; w.InitFailures != 1 || w.Hits != 0 {
		t.Errorf("fake-init-fails after a failed init: %+v", w)
	}

	// No deferred init: exact environment, running before the reply,
	// with the member's key and the environment it booted with.
	req = fakeStart("old", map[string]string{"GREETING": "hi"})
	req["session_id"] = "warm-old-1"
	code, old := e.api(t, "POST", "/start", req)
	if code != 200 || old["status"] != "running" || old["pod_status"] != "ready" || len(old["session_api_key"].(string)) != 64 {
		t.Fatalf("start of an exact-environment warm shape: %d %v", code, old)
	}
	key := old["session_api_key"].(string)
	if code, body := e.agentCall(t, old, "GET", "/api/whoami", key); code != 200 || !strings.Contains(body, `"greeting": "hi"`) || !strings.Contains(body, `"deferred": ""`) {
		t.Errorf("the warm fake with its key: %d %s", code, body)
	}
	if code, _ := e.agentCall(t, old, "GET", "/api/whoami", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("the warm fake with a wrong key: %d", code)
	}
	// Another environment is another shape: cold.
	req = fakeStart("old", map[string]string{"GREETING": "bye"})
	req["session_id"] = "warm-old-2"
	if code, other := e.api(t, "POST", "/start", req); code != 200 || other["status"] != "starting" {
		t.Errorf("start of another environment: %d %v", code, other)
	}
	e.waitRuntime(t, "warm-old-2")
	if w := e.warmConfigs(t)["fake-old"].Warm; w.Hits != 1 {
		t.Errorf("fake-old: %+v", w)
	}
	for _, s := range []string{"warm-fail-1", "warm-old-1", "warm-old-2"} {
		_, r := e.api(t, "GET", "/sessions/"+s, nil)
		if code, out := e.api(t, "POST", "/stop", map[string]any{"runtime_id": r["runtime_id"]}); code != 200 {
			t.Errorf("stop %s: %d %v", s, code, out)
		}
	}
}

// testOHWarm: the shapes of the clients' starts above were learned; once
// their dormant Agent Servers are ready, the same clients start again and
// get them, initialised with their session (/api/init) before /start
// replied, and pass the same checks.
func testOHWarm(t *testing.T, e *ohEnv) {
	learned := func(c map[string]warmConfig) (n, ready, hits, failures int) {
		for _, w := range c {
			if w.Warm.Learned {
				n++
				hits += w.Warm.Hits
				failures += w.Warm.InitFailures
				if w.Warm.Ready > 0 && w.Warm.Deferred {
					ready++
				}
			}
		}
		return
	}
	c := e.waitWarm(t, 15*time.Minute, "three learned shapes with a dormant Agent Server each", func(c map[string]warmConfig) bool {
		n, ready, _, _ := learned(c)
		return n == 3 && ready == 3
	})
	_, _, hits0, _ := learned(c)
	testOHWorkspace(t, e, "sdk-ws-warm")
	testOHConversation(t, e, "sdk-conv-warm")
	testOHAppServer(t, e, "RUNNING")
	_, _, hits, failures := learned(e.warmConfigs(t))
	if hits-hits0 != 3 || failures != 0 {
		t.Errorf("warm starts of the three clients: %d hits, %d init failures; shapes: %+v", hits-hits0, failures, e.warmConfigs(t))
	}
}
