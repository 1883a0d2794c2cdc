package openhands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
)

// ohScript is what the fake LLM answers the conversation: run a command,
// edit a file, finish.
var ohScript = []fixture.LLMStep{
	{Tool: "terminal", Args: map[string]any{"command": "echo hello from the agent > /workspace/project/hello.txt && cat /workspace/project/hello.txt"}},
	{Tool: "file_editor", Args: map[string]any{"command": "insert", "path": "/workspace/project/hello.txt", "insert_line": 1, "new_str": "edited by the file editor"}},
	{Tool: "finish", Args: map[string]any{"message": "The file is written and edited."}},
}

// TestOpenHands runs OpenHands' own clients against the Runtime API, with
// Go checks of the rules they rely on, in one world (the Agent Server
// image is imported once). The server keeps warm Agent Servers of the
// shapes it learns: the clients' first starts are cold, and once the
// dormant Agent Servers of their shapes are ready (Warm) the same clients
// start again from them.
func TestOpenHands(t *testing.T) {
	e := newOHEnv(t, ohScript, ohWarmFlags()...)
	t.Run("Rules", func(t *testing.T) { testOHRules(t, e) })
	t.Run("CrashBeforeReady", func(t *testing.T) { testOHCrash(t, e) })
	t.Run("WorkspaceLifecycle", func(t *testing.T) { testOHWorkspace(t, e, "sdk-ws-1") })
	t.Run("Conversation", func(t *testing.T) { testOHConversation(t, e, "sdk-conv-1") })
	t.Run("AppServer", func(t *testing.T) { testOHAppServer(t, e, "STARTING", "") })
	t.Run("Up", func(t *testing.T) { testOHUp(t, e) })
	t.Run("Warm", func(t *testing.T) { testOHWarm(t, e) })
}

// waitRuntime polls GET /sessions/{id} until status leaves "starting",
// failing on any non-200 on the way (clients abort on those).
func (e *ohEnv) waitRuntime(t *testing.T, session string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		code, rt := e.api(t, "GET", "/sessions/"+session, nil)
		if code != http.StatusOK {
			t.Fatalf("GET /sessions/%s during start: HTTP %d %v", session, code, rt)
		}
		if rt["status"] != "starting" {
			return rt
		}
		if rt["pod_status"] != "pending" {
			t.Fatalf("starting with pod_status %v", rt["pod_status"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("session %s still starting after 5 minutes", session)
	return nil
}

func testOHRules(t *testing.T, e *ohEnv) {
	// The control plane wants the key; errors are {"detail": ...}.
	req, _ := http.NewRequest("GET", e.url+"/list", nil)
	req.Header.Set("X-API-Key", "wrong")
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"detail"`) {
		t.Fatalf("wrong key: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/pause", "/resume", "/stop"} {
		if code, out := e.api(t, "POST", p, map[string]any{"runtime_id": "rt-unknown"}); code != http.StatusNotFound || out["detail"] == nil {
			t.Errorf("%s of an unknown runtime: %d %v", p, code, out)
		}
	}
	if code, _ := e.api(t, "GET", "/sessions/nobody", nil); code != http.StatusNotFound {
		t.Errorf("unknown session: %d", code)
	}
	if code, out := e.api(t, "POST", "/start", map[string]any{"image": e.image}); code != http.StatusBadRequest {
		t.Errorf("start without session_id: %d %v", code, out)
	}

	// Concurrent starts of one session get one runtime, at once, starting.
	start := map[string]any{"image": e.image, "command": "/usr/local/bin/openhands-agent-server --port 60000",
		"working_dir": "/workspace/fresh/dir", "session_id": "rules-1", "run_as_user": 10001, "run_as_group": 10001,
		"fs_group": 10001, "environment": map[string]string{"GREETING": "hi"}, "runtime_class": "sysbox-runc", "resource_factor": 2}
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, rt := e.api(t, "POST", "/start", start)
			if code != http.StatusOK || rt["status"] != "starting" || rt["session_api_key"] == "" {
				t.Errorf("start: %d %v", code, rt)
			}
			ids[i], _ = rt["runtime_id"].(string)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || !strings.HasPrefix(id, "rt-") {
			t.Fatalf("concurrent starts of one session: runtimes %v", ids)
		}
	}
	rt := e.waitRuntime(t, "rules-1")
	if rt["status"] != "running" || rt["pod_status"] != "ready" || rt["url"] != e.url+"/"+ids[0] {
		t.Fatalf("ready runtime: %v", rt)
	}
	key := rt["session_api_key"].(string)
	if code, again := e.api(t, "POST", "/start", start); code != 200 || again["runtime_id"] != ids[0] || again["session_api_key"] != key {
		t.Fatalf("start of a running session: %d %v", code, again)
	}

	// The data plane: the Agent Server checks the injected key; /alive
	// needs none; the command runs as 10001 in the created working dir.
	agent := func(method, path, key, body string) (int, string) {
		req, _ := http.NewRequest(method, rt["url"].(string)+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("X-Session-API-Key", key)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := agent("GET", "/alive", "", ""); code != 200 {
		t.Errorf("/alive through the proxy: %d", code)
	}
	if code, _ := agent("GET", "/api/conversations/search", "", ""); code != http.StatusUnauthorized {
		t.Errorf("/api without the key: %d", code)
	}
	code, out := agent("POST", "/api/bash/execute_bash_command", key, `{"command":"id -u; pwd; stat -c %u /workspace/fresh/dir; echo $GREETING"}`)
	if code != 200 || !strings.Contains(out, `10001\n/workspace/fresh/dir\n10001\nhi\n`) {
		t.Errorf("command through the proxy: %d %s", code, out)
	}

	// batch leaves unknown ids out; list has starting and running only.
	_, b := e.api(t, "GET", "/sessions/batch?ids=rules-1&ids=nobody&ids=rules-1", nil)
	if list, _ := b["list"].([]any); len(list) != 1 || list[0].(map[string]any)["session_id"] != "rules-1" {
		t.Errorf("batch: %v", b)
	}
	listed := func() []string {
		_, l := e.api(t, "GET", "/list", nil)
		var s []string
		for _, r := range l["runtimes"].([]any) {
			s = append(s, r.(map[string]any)["runtime_id"].(string))
		}
		return s
	}
	if l := listed(); len(l) != 1 || l[0] != ids[0] {
		t.Errorf("list while running: %v", l)
	}
	// pause keeps the key and leaves the list; the data plane says so.
	if code, p := e.api(t, "POST", "/pause", map[string]any{"runtime_id": ids[0]}); code != 200 || p["status"] != "paused" || p["pod_status"] != "paused" {
		t.Fatalf("pause: %d %v", code, p)
	}
	if l := listed(); len(l) != 0 {
		t.Errorf("list while paused: %v", l)
	}
	if code, _ := agent("GET", "/alive", "", ""); code != http.StatusServiceUnavailable {
		t.Errorf("data plane of a paused runtime: %d", code)
	}
	if code, r := e.api(t, "POST", "/resume", map[string]any{"runtime_id": ids[0]}); code != 200 || r["status"] != "running" || r["session_api_key"] != key {
		t.Fatalf("resume: %d %v", code, r)
	}
	if code, _ := agent("GET", "/api/conversations/search", key, ""); code != 200 {
		t.Errorf("after resume: %d", code)
	}
	// stop removes the sandbox and keeps a tombstone.
	if code, s := e.api(t, "POST", "/stop", map[string]any{"runtime_id": ids[0]}); code != 200 || s["status"] != "stopped" {
		t.Fatalf("stop: %d %v", code, s)
	}
	if code, s := e.api(t, "GET", "/sessions/rules-1", nil); code != 200 || s["status"] != "stopped" {
		t.Errorf("session after stop: %d %v", code, s)
	}
	if code, _ := e.api(t, "POST", "/stop", map[string]any{"runtime_id": ids[0]}); code != 200 {
		t.Errorf("second stop: %d", code)
	}
	waitFor(t, func() bool {
		_, err := e.host.Get(context.Background(), rt["sandbox_id"].(string))
		return err != nil
	})
}

func testOHCrash(t *testing.T, e *ohEnv) {
	// A command that dies before the Agent Server answers: error, failed,
	// and its output in pod_logs.
	code, rt := e.api(t, "POST", "/start", map[string]any{"image": e.image, "session_id": "crash-1",
		"command": []string{"sh", "-c", "echo boom on stdout; echo broken >&2; exit 3"}})
	if code != 200 {
		t.Fatalf("start: %d %v", code, rt)
	}
	rt = e.waitRuntime(t, "crash-1")
	if rt["status"] != "error" || rt["pod_status"] != "failed" || !strings.Contains(rt["status_detail"].(string), "code 3") ||
		!strings.Contains(rt["pod_logs"].(string), "boom on stdout") || !strings.Contains(rt["pod_logs"].(string), "broken") {
		t.Fatalf("crashed runtime: %v", rt)
	}
	// The SDK starts a session in a bad state again: a new runtime.
	code, again := e.api(t, "POST", "/start", map[string]any{"image": e.image, "session_id": "crash-1", "command": "true"})
	if code != 200 || again["runtime_id"] == rt["runtime_id"] || again["status"] != "starting" {
		t.Fatalf("restart of a failed session: %d %v", code, again)
	}
	e.waitRuntime(t, "crash-1")
	// An image that is not there with pull policy Never: ErrImagePull-style
	// marker first in status_detail.
	e.api(t, "POST", "/start", map[string]any{"image": "sbx.test/no/such:image", "session_id": "noimage-1", "image_pull_policy": "Never"})
	rt = e.waitRuntime(t, "noimage-1")
	if rt["status"] != "error" || !strings.HasPrefix(rt["status_detail"].(string), "ErrImageNeverPull") {
		t.Fatalf("missing image: %v", rt)
	}
}

func testOHWorkspace(t *testing.T, e *ohEnv, session string) {
	f := e.python(t, e.sdkURL, "/agent-server/.venv/bin/python", "workspace_lifecycle.py", map[string]string{"SESSION_ID": session})
	want := map[string]string{
		"exec":                    `map[exit_code:3 stderr:err` + "\n" + ` stdout:hello from openhands in /workspace/project` + "\n" + `]`,
		"files":                   "map[download:true same:true upload:true]",
		"git":                     "[ADDED:untracked.txt ADDED:up.bin UPDATED:tracked.txt]",
		"no_key_status":           "401",
		"health_status":           "200",
		"paused_status":           "paused",
		"after_resume":            "one\ntwo\n",
		"reattached_same_runtime": "true",
		"reattach_exec":           "again\n",
		"stopped_status":          "stopped",
	}
	checkFacts(t, f, want)
}

func testOHConversation(t *testing.T, e *ohEnv, session string) {
	f := e.python(t, e.sdkURL, "/agent-server/.venv/bin/python", "conversation.py", map[string]string{"SESSION_ID": session})
	if f["status"] != "finished" || f["file"] != "hello from the agent\nedited by the file editor\n" {
		t.Errorf("conversation: %v", f)
	}
	events := fmt.Sprint(f["events"])
	for _, want := range []string{"ActionEvent", "ObservationEvent"} {
		if !strings.Contains(events, want) {
			t.Errorf("no %s streamed over the WebSocket: %s", want, events)
		}
	}
	reqs := e.llm.Requests()
	if len(reqs) < 3 {
		t.Fatalf("the LLM got %d requests", len(reqs))
	}
	// The terminal's output went back to the LLM.
	last, _ := json.Marshal(reqs[len(reqs)-1]["messages"])
	if !strings.Contains(string(last), "hello from the agent") {
		t.Errorf("the tool results never reached the LLM: %.2000s", last)
	}
	if errs := e.llm.Errors(); len(errs) > 0 {
		t.Errorf("the fake LLM got requests it does not serve: %v", errs)
	}
}

// testOHAppServer runs the app server's RemoteSandboxService; started is
// the status its start returns (RUNNING from a warm Agent Server). With a
// warmSpec, the app server takes its sandbox spec from the Runtime API's
// warm shapes (DynamicRemoteSandboxSpecService), that one by name.
func testOHAppServer(t *testing.T, e *ohEnv, started, warmSpec string) {
	var env map[string]string
	if warmSpec != "" {
		env = map[string]string{"WARM_SPEC_NAME": warmSpec}
	}
	f := e.python(t, e.url, "/opt/openhands-ai/bin/python", "app_server.py", env)
	want := map[string]string{
		"started":             started,
		"running":             "RUNNING",
		"urls":                "[AGENT_SERVER VSCODE WORKER_1 WORKER_2]",
		"agent_server_status": "200",
		"search":              "[[true RUNNING]]",
		"batch":               "[RUNNING <nil>]",
		"paused":              "true",
		"after_pause":         "PAUSED",
		"resumed":             "true",
		"after_resume":        "RUNNING",
		"deleted":             "true",
		"missing":             "true",
	}
	if warmSpec != "" {
		want["spec"] = "[" + ohAskedImage + " [/usr/local/bin/openhands-agent-server --port 60000] [LOG_JSON OH_ENABLE_VNC WORKER_1 WORKER_2]]"
	}
	checkFacts(t, f, want)
}

// checkFacts compares the facts a client script printed with want.
func checkFacts(t *testing.T, facts map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := fmt.Sprint(facts[k]); got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

// testOHUp: sbx openhands up starts one Agent Server with its port
// published on the host and prints what Agent Canvas asks for; bad flags
// fail and leave nothing.
func testOHUp(t *testing.T, e *ohEnv) {
	run := func(args ...string) (string, error) {
		cmd := e.sbx(append([]string{"openhands", "up"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out) + stderr.String(), err
	}
	upFlags := []string{"--image", e.image, "--alias", "ghcr.io/openhands/agent-server:*=" + ohLocalImage, "--memory", "2g",
		"--env", "LITELLM_LOCAL_MODEL_COST_MAP=True", "--json"}
	out, err := run(append(upFlags, "--name", "canvas", "--port", "8800", "--warm", "1")...)
	if err != nil {
		t.Fatalf("sbx openhands up: %v\n%s", err, out)
	}
	var res struct {
		URL, Name string
		Key       string `json:"session_api_key"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.URL != "http://127.0.0.1:8800" || len(res.Key) != 64 || res.Name != "canvas" {
		t.Fatalf("sbx openhands up printed %q (%v)", out, err)
	}
	defer func() {
		if out, err := e.sbx("rm", "-f", "canvas").CombinedOutput(); err != nil {
			t.Errorf("sbx rm -f canvas: %v\n%s", err, out)
		}
	}()
	// The first command starts the Agent Server's bash session, which
	// took over a minute on a loaded 2-core machine: allow it three.
	hc := *e.hc
	hc.Timeout = 3 * time.Minute
	call := func(key string) (int, string) {
		return upCall(t, &hc, res.URL, key)
	}
	if code, body := call(res.Key); code != 200 || !strings.Contains(body, `/workspace\nup\n`) {
		t.Errorf("command with the key: %d %s", code, body)
	}
	if code, _ := call(""); code != http.StatusUnauthorized {
		t.Errorf("command without the key: %d", code)
	}
	// A name in use and a bad alias fail and leave nothing behind.
	if out, err := run(append(upFlags, "--name", "canvas", "--port", "8801")...); err == nil || !strings.Contains(out, "canvas") {
		t.Errorf("a second up with the same name: %v %s", err, out)
	}
	if out, err := run("--alias", "no-equals-sign"); err == nil || !strings.Contains(out, "PATTERN=IMAGE") {
		t.Errorf("a bad alias: %v %s", err, out)
	}
	sbs, err := e.host.List(context.Background(), sbx.Filter{Labels: map[string]string{"sbx.openhands/up": "1"}})
	if err != nil || len(sbs) != 1 {
		t.Errorf("sandboxes of sbx openhands up: %d (%v), want 1", len(sbs), err)
	}

	// --warm 1 defined a warm pool of the shape: once it holds a dormant
	// Agent Server, the next up takes it, handed the session.
	upPool := func() bool { // sbx serve fills it in the background
		pools, err := e.host.ListPools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pools {
			// up's shape: its working directory, the image's user.
			if o := p.Options; strings.HasPrefix(p.Name, "openhands-") && o.Workdir == "/workspace" && o.User == "" && len(p.Ready) > 0 {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Minute); !upPool(); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool of sbx openhands up --warm 1 has no ready member after 10 minutes")
		}
	}
	out, err = run(append(upFlags, "--name", "canvas-warm", "--port", "8802")...)
	var warm struct {
		URL, Name string
		Key       string `json:"session_api_key"`
		SandboxID string `json:"sandbox_id"`
	}
	if err != nil || json.Unmarshal([]byte(out), &warm) != nil || len(warm.Key) != 64 || warm.Key == res.Key {
		t.Fatalf("a warm sbx openhands up: %v %q", err, out)
	}
	defer e.sbx("rm", "-f", "canvas-warm").Run()
	if sb, err := e.host.Get(context.Background(), warm.SandboxID); err != nil || sb.FromPool == "" {
		t.Errorf("the warm up's sandbox: %+v %v", sb, err)
	}
	if code, body := upCall(t, &hc, warm.URL, warm.Key); code != 200 || !strings.Contains(body, `/workspace\nup\n`) {
		t.Errorf("command on the warm up's Agent Server: %d %s", code, body)
	}
	if code, _ := upCall(t, &hc, warm.URL, res.Key); code != http.StatusUnauthorized {
		t.Errorf("the warm Agent Server took another's key: %d", code)
	}
}

// upCall runs a command on the Agent Server of sbx openhands up at url.
func upCall(t *testing.T, hc *http.Client, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/api/bash/execute_bash_command", strings.NewReader(`{"command":"pwd; echo up"}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the published Agent Server: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
