package openhands_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// ohWarmFlags are sbx serve's flags for warm Agent Servers in the test:
// one per shape, the shapes of the three latest cold starts learned.
func ohWarmFlags() []string {
	return []string{"--openhands-warm", "1", "--openhands-warm-learn", "3"}
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

// warmConfigs are the warm shapes of both Runtime API listeners (path
// mode: the app server's; port mode: the SDK's), by name.
func (e *ohEnv) warmConfigs(t testing.TB) map[string]warmConfig {
	t.Helper()
	return e.warmConfigsOf(t, e.url, e.sdkURL)
}

// warmConfigsOf are the warm shapes of the listeners at bases.
func (e *ohEnv) warmConfigsOf(t testing.TB, bases ...string) map[string]warmConfig {
	t.Helper()
	m := map[string]warmConfig{}
	for _, base := range bases {
		req, _ := http.NewRequest("GET", base+"/api/warm-runtime-configs", nil)
		req.Header.Set("X-API-Key", e.key)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Configs []warmConfig `json:"configs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s/api/warm-runtime-configs: %d %v", base, resp.StatusCode, err)
		}
		for _, c := range out.Configs {
			m[c.Name] = c
		}
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

// testOHWarm: the shapes of the clients' starts above were learned (the
// SDK's two: its workspace asks for resource_factor 2, its conversation
// for 1; the app server's one); once their dormant Agent Servers are
// ready, the same clients start again and get them, initialised with
// their session (/api/init) before /start replied, and pass the same
// checks. The app server takes its spec from GET /api/warm-runtime-configs
// (DynamicRemoteSandboxSpecService), as OpenHands Cloud's app server does.
func testOHWarm(t *testing.T, e *ohEnv) {
	// The clients' shapes: every learned one but the Rules' start's (its
	// own working directory).
	clients := func(c map[string]warmConfig) (n, ready, hits, failures int) {
		for _, w := range c {
			if w.Warm.Learned && w.WorkingDir != "/workspace/fresh/dir" {
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
	c := e.waitWarm(t, 15*time.Minute, "the clients' three learned shapes with a dormant Agent Server each", func(c map[string]warmConfig) bool {
		n, ready, _, _ := clients(c)
		return n == 3 && ready == 3
	})
	_, _, hits0, _ := clients(c)
	// The app server's shape, by name (RemoteSandboxService always asks
	// for /workspace).
	appShape := ""
	for name, w := range e.warmConfigsOf(t, e.url) {
		if w.Warm.Learned && w.WorkingDir == "/workspace" {
			appShape = name
		}
	}
	if appShape == "" {
		t.Fatalf("no learned shape of the app server's start: %+v", e.warmConfigsOf(t, e.url))
	}
	testOHWorkspace(t, e, "sdk-ws-warm")
	testOHConversation(t, e, "sdk-conv-warm")
	testOHAppServer(t, e, "RUNNING", appShape)
	_, _, hits, failures := clients(e.warmConfigs(t))
	if hits-hits0 != 3 || failures != 0 {
		t.Errorf("warm starts of the three clients: %d hits, %d init failures; shapes: %+v", hits-hits0, failures, e.warmConfigs(t))
	}
}
