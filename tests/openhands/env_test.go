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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
)

// The OpenHands end-to-end world. All traffic stays inside namespaces the
// test made:
//
//	H, standing in for the host: bridge sbx0 with the sandboxes and NAT,
//	  sbx serve with the Runtime API (control and data plane), and an
//	  uplink 203.0.113.1/24.
//	I, standing in for the internet: 203.0.113.2/24, the fake LLM.
//
// The client sandbox runs OpenHands' Python clients with H's network (as
// a process on the host would) against http://203.0.113.1:PORT; the Agent
// Server sandboxes reach the LLM the way they reach a real one, by egress
// through the bridge's NAT; the Runtime API reaches each Agent Server
// through DialPort, from inside the sandbox's namespace. The test process
// itself talks to the Runtime API from inside H. H has no route beyond I.
//
// `sbx serve` runs in H with two Runtime API listeners over the same
// sandboxes: one in path mode (URLs http://203.0.113.1:8700/<runtime_id>,
// for the app server) and one in port mode (a listener per runtime, for
// the SDK's APIRemoteWorkspace, which cannot take a URL with a path).
type ohEnv struct {
	trees  *fixture.OpenHands
	dir    string
	host   *sandbox.Host
	url    string // the Runtime API in path mode, http://203.0.113.1:PORT
	sdkURL string // the Runtime API in port mode
	hostNS string
	key    string
	hc     *http.Client // the test's client, inside H
	image  string       // what clients ask for (an alias of the imported image)
	llm    *fixture.FakeLLM
}

const (
	ohUplinkHost = "203.0.113.1"
	ohInternet   = "203.0.113.2"
	ohLocalImage = "sbx.test/openhands/agent-server:1.58.0"
	ohAskedImage = "ghcr.io/openhands/agent-server:1.58.0-python"
)

// The Runtime API's listeners inside H (a namespace of the test's own, so
// fixed ports collide with nothing).
const (
	ohPathPort = 8700
	ohPortPort = 8701
)

// newOHEnv builds the world, with script driving the fake LLM: `sbx
// serve` with both Runtime API listeners (and the extra flags) runs in H.
func newOHEnv(t testing.TB, script []fixture.LLMStep, extra ...string) *ohEnv {
	t.Helper()
	trees := fixture.OpenHandsTrees(t)
	dir, err := os.MkdirTemp("", "sbxoh") // short: socket paths must fit 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e := &ohEnv{trees: trees, dir: dir, key: "test-api-key-0123456789", image: ohAskedImage}
	hostNS, inetNS := ohNamespace(t, "h"), ohNamespace(t, "i")
	ohUplink(t, hostNS, inetNS)
	e.hostNS = hostNS

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("SBX_TEST_LOG") != "" {
		quiet = slog.Default()
	}
	// The test's own Host on the same state, for imports and checks (two
	// processes on one root are safe).
	e.host, err = sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		Executor: os.Getenv("SBX_EXECUTOR_BIN"), HostNetNS: hostNS, Pull: sbx.PullNever, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.host.ImportImage(ctx, sbx.ImportOptions{Path: trees.ImageTar, Name: ohLocalImage}); err != nil {
		t.Fatalf("import the Agent Server image: %v", err)
	}
	var llmLn net.Listener
	if err := netns.InNamespacePath(inetNS, func() (err error) {
		llmLn, err = net.Listen("tcp", ohInternet+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.llm = fixture.StartFakeLLM(t, llmLn, script)

	keyFile := filepath.Join(dir, "openhands.key")
	if err := os.WriteFile(keyFile, []byte(e.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.url = fmt.Sprintf("http://%s:%d", ohUplinkHost, ohPathPort)
	e.sdkURL = fmt.Sprintf("http://%s:%d", ohUplinkHost, ohPortPort)
	e.hc = ohHTTPClient(hostNS)
	serve := e.sbx(append([]string{"serve",
		"--openhands-listen", fmt.Sprintf("0.0.0.0:%d", ohPathPort),
		"--openhands-port-listen", fmt.Sprintf("0.0.0.0:%d", ohPortPort),
		"--openhands-public-host", ohUplinkHost,
		"--openhands-key-file", keyFile,
		"--openhands-alias", "ghcr.io/openhands/agent-server:*=" + ohLocalImage,
		"--openhands-agent-tree", trees.AgentTree,
		"--openhands-memory", "2g", "--openhands-pids-limit", "2048",
		// litellm fetches a model price list from the internet when it is
		// imported; here there is none.
		"--openhands-env", "LITELLM_LOCAL_MODEL_COST_MAP=True",
	}, append(extra, executorFlag()...)...)...)
	var serveLog strings.Builder
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatalf("start sbx serve: %v", err)
	}
	served := make(chan struct{})
	go func() { serve.Wait(); close(served) }()
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-served:
		case <-time.After(time.Minute):
			serve.Process.Kill()
			<-served
			t.Errorf("sbx serve did not stop within a minute of SIGTERM")
		}
		if t.Failed() {
			t.Logf("sbx serve's log:\n%s", tail(serveLog.String(), 8000))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pools, _ := e.host.ListPools(ctx)
		for _, p := range pools {
			if _, err := e.host.RemovePool(ctx, p.Name); err != nil {
				t.Errorf("remove pool %s: %v", p.Name, err)
			}
		}
		sbs, _ := e.host.List(ctx, sbx.Filter{Pooled: true})
		for _, sb := range sbs {
			if err := e.host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
				t.Errorf("remove %s: %v", sb.ID, err)
			}
		}
		if _, err := e.host.GC(ctx); err != nil {
			t.Errorf("gc: %v", err)
		}
		e.host.Close()
		ohAssertNoLeftovers(t, dir)
		os.RemoveAll(dir)
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-served:
			t.Fatalf("sbx serve ended: %v\n%s", serve.ProcessState, serveLog.String())
		default:
		}
		req, _ := http.NewRequest("GET", e.url+"/list", nil)
		req.Header.Set("X-API-Key", e.key)
		if resp, err := e.hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Runtime API of sbx serve did not answer within a minute\n%s", serveLog.String())
		}
	}
	return e
}

// sbx is a command of sbx on the test's state, in H's network.
func (e *ohEnv) sbx(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + e.hostNS, sbxBin, "--root", filepath.Join(e.dir, "root"), "--run-root", filepath.Join(e.dir, "run")}, args...)...)
}

// executorFlag is sbx serve's hidden --executor-binary for
// $SBX_EXECUTOR_BIN, when it is set.
func executorFlag() []string {
	if p := os.Getenv("SBX_EXECUTOR_BIN"); p != "" {
		return []string{"--executor-binary", p}
	}
	return nil
}

// ohNamespace creates a network namespace of the test's own and returns
// its path.
func ohNamespace(t testing.TB, role string) string {
	t.Helper()
	name := fmt.Sprintf("sbxoh-%d-%s", os.Getpid(), role)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v\n%s", name, err, out)
	}
	return "/run/netns/" + name
}

// ohHTTPClient makes its connections inside the namespace at nsPath.
func ohHTTPClient(nsPath string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(ctx, nsPath, network, addr)
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// ohAssertNoLeftovers fails if the sandboxes under dir left mounts or
// cgroups behind.
func ohAssertNoLeftovers(t testing.TB, dir string) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, dir+"/") {
			t.Errorf("leftover mount: %s", line)
		}
	}
	for id, paths := range cgroup.Leftovers() {
		t.Errorf("leftover cgroups of %s: %v", id, paths)
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
	}
}

// ohUplink joins the host stand-in and the internet stand-in with a veth.
func ohUplink(t testing.TB, hostNS, inetNS string) {
	t.Helper()
	h, i := filepath.Base(hostNS), filepath.Base(inetNS)
	for _, args := range [][]string{
		{"-n", h, "link", "add", "uplink", "type", "veth", "peer", "name", "eth0", "netns", i},
		{"-n", h, "addr", "add", ohUplinkHost + "/24", "dev", "uplink"},
		{"-n", h, "link", "set", "uplink", "up"},
		{"-n", i, "addr", "add", ohInternet + "/24", "dev", "eth0"},
		{"-n", i, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// python runs an OpenHands client script with sbx's CLI in a sandbox of
// the Agent Server image with H's network, against the Runtime API at
// apiURL, and returns the facts it prints.
func (e *ohEnv) python(t *testing.T, apiURL, python, script string, env map[string]string) map[string]any {
	t.Helper()
	full := map[string]string{"RUNTIME_API_URL": apiURL, "RUNTIME_API_KEY": e.key, "AGENT_IMAGE": e.image,
		"LLM_BASE_URL": e.llm.URL, "PYTHONUNBUFFERED": "1", "HOME": "/root", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
	for k, v := range env {
		full[k] = v
	}
	sbxCmd := e.sbx
	create := sbxCmd("create", "--network", "host", "--memory", "2g",
		"-v", e.trees.Scripts+":/tests:ro", "-v", e.trees.AppServer+":/opt/openhands-ai:ro", ohLocalImage)
	var createErr strings.Builder
	create.Stderr = &createErr
	out, err := create.Output()
	if err != nil {
		t.Fatalf("create the client sandbox: %v\n%s%s", err, out, createErr.String())
	}
	id := strings.TrimSpace(string(out))
	defer func() {
		if out, err := sbxCmd("rm", "-f", id).CombinedOutput(); err != nil {
			t.Errorf("remove the client sandbox: %v\n%s", err, out)
		}
	}()
	args := []string{"exec", "--timeout", "9m"}
	for k, v := range full {
		args = append(args, "-e", k+"="+v)
	}
	cmd := sbxCmd(append(args, id, "--", python, "/tests/"+script)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	for _, line := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "FACTS "); ok {
			var facts map[string]any
			if err := json.Unmarshal([]byte(rest), &facts); err != nil {
				t.Fatalf("%s: bad facts %q: %v", script, rest, err)
			}
			if err != nil {
				t.Errorf("%s: %v", script, err)
			}
			return facts
		}
	}
	t.Fatalf("%s: %v, no facts\nstdout:\n%s\nstderr:\n%s", script, err, tail(stdout.String(), 4000), tail(stderr.String(), 8000))
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// api calls the Runtime API's control plane.
func (e *ohEnv) api(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = strings.NewReader(string(data))
	}
	req, _ := http.NewRequest(method, e.url+path, r)
	req.Header.Set("X-API-Key", e.key)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 && data[0] == '[' {
		var list []any
		json.Unmarshal(data, &list)
		out = map[string]any{"list": list}
	} else {
		json.Unmarshal(data, &out)
	}
	return resp.StatusCode, out
}
