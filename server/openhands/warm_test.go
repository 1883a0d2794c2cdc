package openhands

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShapeSplitsTheEnvironment: a deferred shape boots with what the
// Agent Server reads at boot (OH_*, logging, VS Code's root, the
// operator's variables) and OH_DEFERRED_INIT, never a session key; the
// rest of a request's variables (LLM settings) does not change the shape
// and goes to /api/init. An exact shape boots with everything.
func TestShapeSplitsTheEnvironment(t *testing.T) {
	s := &Service{cfg: Config{Network: "bridge", Environment: map[string]string{"LITELLM_LOCAL_MODEL_COST_MAP": "True"}}}
	w := &warm{prefix: warmPrefix}
	uid := 10001
	req := StartRequest{Image: "agent:local", Command: Command{"/usr/local/bin/openhands-agent-server", "--port", "60000"},
		WorkingDir: "/workspace/project", RunAsUser: &uid, ResourceFactor: 1,
		Environment: map[string]string{"OH_ENABLE_VNC": "0", "LOG_JSON": "true", "OPENVSCODE_SERVER_ROOT": "/openhands/.openvscode-server",
			"LLM_API_KEY": "secret-1", "SESSION_API_KEY": "chosen-by-the-client"}}
	sh, err := w.shapeOf(s, req, true)
	if err != nil {
		t.Fatal(err)
	}
	o := sh.spec.Options
	want := []string{"LITELLM_LOCAL_MODEL_COST_MAP=True", "LOG_JSON=true", "OH_DEFERRED_INIT=true", "OH_ENABLE_VNC=0", "OPENVSCODE_SERVER_ROOT=/openhands/.openvscode-server"}
	if !slices.Equal(o.Env, want) {
		t.Errorf("deferred boot env: %q, want %q", o.Env, want)
	}
	if o.User != "10001" || o.Workdir != "/workspace/project" || o.Cmd[0] != "/usr/local/bin/openhands-agent-server" || o.Name != "" || o.Labels != nil {
		t.Errorf("pool options: %+v", o)
	}
	if !slices.Equal(sh.spec.KeyEnv, keyVars) || sh.spec.ReadyCheck == nil || sh.spec.ReadyCheck.Path != "/api/init" || !strings.HasPrefix(sh.spec.Name, warmPrefix) {
		t.Errorf("pool spec: %+v", sh.spec)
	}
	if err := sh.spec.Validate(); err != nil {
		t.Errorf("the pool spec does not validate: %v", err)
	}
	req.Environment["LLM_API_KEY"] = "secret-2"
	if other, _ := w.shapeOf(s, req, true); other.spec.Name != sh.spec.Name {
		t.Errorf("another LLM key made another deferred shape")
	}
	exact, _ := w.shapeOf(s, req, false)
	if exact.spec.Name == sh.spec.Name || !slices.Contains(exact.spec.Options.Env, "LLM_API_KEY=secret-2") ||
		slices.Contains(exact.spec.Options.Env, "OH_DEFERRED_INIT=true") || exact.spec.ReadyCheck.Path != "/alive" {
		t.Errorf("exact shape: %+v", exact.spec)
	}
	for _, kv := range append(o.Env, exact.spec.Options.Env...) {
		if strings.HasPrefix(kv, "SESSION_API_KEY=") {
			t.Errorf("a session key in a boot environment: %s", kv)
		}
	}
}

// TestWarmConfigFile: the shapes file is the warm-runtime-configs object;
// unknown fields and bad sizes are refused.
func TestWarmConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "warm.json")
	os.WriteFile(good, []byte(`{"configs":[{"name":"sdk","image":"ghcr.io/openhands/agent-server:1.58.0-python",
		"command":"/usr/local/bin/openhands-agent-server --port 60000","working_dir":"/workspace/project",
		"environment":{"OH_ENABLE_VNC":"0"},"run_as_user":10001,"size":2}]}`), 0o600)
	o := ServeOptions{WarmSize: 1, WarmFile: good}
	c, err := o.warmConfig()
	if err != nil || len(c.Shapes) != 1 || c.Shapes[0].Size != 2 || c.Shapes[0].Command[2] != "60000" || *c.Shapes[0].RunAsUser != 10001 {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"configs":[{"name":"x","imgae":"typo"}]}`), 0o600)
	if _, err := (&ServeOptions{WarmFile: bad}).warmConfig(); err == nil {
		t.Error("an unknown field was accepted")
	}
	if _, err := (&ServeOptions{WarmSize: MaxWarmSize + 1}).warmConfig(); err == nil {
		t.Error("a size over the cap was accepted")
	}
}

// TestWarmNeedsPools: warm Agent Servers come only from the pools the
// front-end supplies (Config.WarmPools, UpOptions.WarmPools); asking for
// them without is a clear error, before anything is made.
func TestWarmNeedsPools(t *testing.T) {
	dir := t.TempDir()
	_, err := New(nil, Config{APIKey: "k", PublicURL: "http://h", StateDir: filepath.Join(dir, "oh"), Warm: WarmConfig{Size: 1}})
	if _, serr := os.Stat(filepath.Join(dir, "oh")); serr == nil {
		t.Errorf("New made its state directory before refusing")
	}
	if err == nil || !strings.Contains(err.Error(), "WarmPools") {
		t.Errorf("New with warm Agent Servers and no pools: %v", err)
	}
	for _, warm := range []int{1, -1, MaxWarmSize + 1} {
		if _, err := Up(t.Context(), nil, UpOptions{Warm: warm}); err == nil || !strings.Contains(err.Error(), "warm") {
			t.Errorf("Up with warm %d and no pools: %v", warm, err)
		}
	}
}

// TestShapeEgress: a configured shape's egress policy is its pool's (so
// a claim applies it and the members idle under it) and what a cold start
// of the shape gets, without changing the shape; another start gets
// none of its own; two configured shapes of one start must agree.
func TestShapeEgress(t *testing.T) {
	s := &Service{cfg: Config{Network: "bridge", Egress: "10.0.0.0/8"}}
	w := &warm{prefix: warmPrefix, shapes: map[string]*shape{}}
	s.warm = w
	req := StartRequest{Image: "agent:local", Command: Command{"/usr/local/bin/openhands-agent-server", "--port", "60000"}, ResourceFactor: 1}
	plain, err := w.shapeOf(s, req, true)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := w.add(s, "llm", req, "api.test", 1, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if sh.spec.Name != plain.spec.Name || sh.spec.Options.Egress != "api.test" || plain.spec.Options.Egress != "10.0.0.0/8" {
		t.Errorf("the shape's pool: %s %q, without the policy %s %q", sh.spec.Name, sh.spec.Options.Egress, plain.spec.Name, plain.spec.Options.Egress)
	}
	start := req
	start.SessionID, start.Environment = "s1", map[string]string{"LLM_API_KEY": "k"}
	if got := w.egressOf(s, start); got != "api.test" {
		t.Errorf("a start of the shape gets egress %q", got)
	}
	other := req
	other.WorkingDir = "/elsewhere"
	if got := w.egressOf(s, other); got != "" {
		t.Errorf("a start of another shape gets egress %q", got)
	}
	if got := (*warm)(nil).egressOf(s, start); got != "" {
		t.Errorf("without warm shapes: %q", got)
	}
	if _, err := w.add(s, "llm-2", req, "other.test", 1, true, false); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Errorf("a second shape of the same start with another policy: %v", err)
	}
	if cur, err := w.add(s, "", req, "", 1, true, true); err != nil || cur != sh {
		t.Errorf("learning the configured shape's start: %v", err)
	}
}
