package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
)

const testToken = "s3cret-token-0123456789abcdef"

// newTestServer builds a server over a Host with a private state
// directory (mutate may change both configurations). No sandbox is
// started by these tests; the integration tests in tests/ run real ones.
func newTestServer(t *testing.T, mutate func(*Config, *sandbox.HostConfig)) (*Server, *httptest.Server) {
	t.Helper()
	s, hs, _ := newTestServerHost(t, mutate, nil)
	return s, hs
}

// newTestServerHost is newTestServer whose backend wrap may replace
// (wrapping the Host).
func newTestServerHost(t *testing.T, mutate func(*Config, *sandbox.HostConfig), wrap func(*sandbox.Host) Backend) (*Server, *httptest.Server, *sandbox.Host) {
	t.Helper()
	roottest.Require(t, "the server runs over a sandbox.Host, which only root may open")
	dir, err := os.MkdirTemp("", "sbxsrv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	hcfg := sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Executor: "/nonexistent",
		WatchInterval: 50 * time.Millisecond, Policy: &sbx.Policy{}}
	cfg := Config{Token: testToken}
	if mutate != nil {
		mutate(&cfg, &hcfg)
	}
	h, err := sandbox.Open(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend, cfg.Background = h, h
	if wrap != nil {
		b := wrap(h)
		cfg.Backend, cfg.Background = b, b.(Background) // each wrapper embeds the Host
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		s.Close()
		_ = h.Close()
	})
	return s, hs, h
}

// concrete fills in a route pattern's wildcards.
func concrete(pattern string) string {
	r := strings.NewReplacer("{id}", "0123456789ab", "{session}", "s1", "{ref...}", "docker.io/library/busybox:latest")
	return r.Replace(pattern)
}

func do(t *testing.T, method, url, auth string, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func errorCode(t *testing.T, data []byte) string {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("not a JSON error reply: %q", data)
	}
	return e.Error.Code
}

func TestEveryRouteRefusesBadTokens(t *testing.T) {
	_, hs := newTestServer(t, nil)
	bad := map[string]string{
		"missing":             "",
		"wrong":               "Bearer wrong-token",
		"empty bearer":        "Bearer ",
		"last char changed":   "Bearer " + testToken[:len(testToken)-1] + "g",
		"one char short":      "Bearer " + testToken[:len(testToken)-1],
		"one char more":       "Bearer " + testToken + "x",
		"other scheme":        "Basic " + testToken,
		"no scheme":           testToken,
		"double space":        "Bearer  " + testToken,
		"upper-cased token":   "Bearer " + strings.ToUpper(testToken),
		"prefix of the token": "Bearer " + testToken[:8],
	}
	routes := Routes()
	routes = append(routes, Route{Method: http.MethodGet, Pattern: "/no/such/route"}, Route{Method: http.MethodPatch, Pattern: "/v1/sandboxes"})
	for _, rt := range routes {
		url := hs.URL + concrete(rt.Pattern)
		if rt.NoAuth {
			resp, _ := do(t, rt.Method, url, "", "")
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s without a token: %d, want 200", rt.Method, rt.Pattern, resp.StatusCode)
			}
			continue
		}
		for name, auth := range bad {
			resp, data := do(t, rt.Method, url, auth, `{}`)
			if resp.StatusCode != http.StatusUnauthorized || errorCode(t, data) != api.CodeUnauthorized {
				t.Errorf("%s %s with %s token: %d %s, want 401", rt.Method, rt.Pattern, name, resp.StatusCode, data)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", rt.Method, rt.Pattern)
			}
		}
		// The scheme is case-insensitive (RFC 9110); the right token passes.
		for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
			if rt.Pattern == "/v1/events" {
				continue // a stream; checked in TestEventsStreamInOrder
			}
			resp, _ := do(t, rt.Method, url, auth, `{}`)
			if resp.StatusCode == http.StatusUnauthorized {
				t.Errorf("%s %s with the right token (%q): 401", rt.Method, rt.Pattern, auth[:6])
			}
		}
	}
}

func TestNoTokenConfiguredAllowsAll(t *testing.T) {
	_, hs := newTestServer(t, func(c *Config, _ *sandbox.HostConfig) { c.Token = "" })
	resp, data := do(t, http.MethodGet, hs.URL+"/v1/sandboxes", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("no token configured: %d %s", resp.StatusCode, data)
	}
}

// openapiDoc is the part of an OpenAPI document the route check reads.
type openapiDoc struct {
	OpenAPI string                    `yaml:"openapi"`
	Paths   map[string]map[string]any `yaml:"paths"`
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc openapiDoc
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.yaml is version %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	param := regexp.MustCompile(`\{([a-z]+)\}`)
	for path, item := range doc.Paths {
		for method, v := range item {
			op, ok := v.(map[string]any)
			if method == "parameters" || !ok {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			documented[key] = true
			// Every path parameter is declared, on the path or the operation.
			declared := map[string]bool{}
			for _, src := range []any{item["parameters"], op["parameters"]} {
				list, _ := src.([]any)
				for _, p := range list {
					pm, _ := p.(map[string]any)
					if ref, ok := pm["$ref"].(string); ok && strings.HasSuffix(ref, "/SandboxID") {
						declared["id"] = true
					}
					if pm["in"] == "path" {
						declared[pm["name"].(string)] = true
					}
				}
			}
			for _, m := range param.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %s is not declared", key, m[1])
				}
			}
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s: no responses", key)
			}
		}
	}
	routed := map[string]bool{}
	for _, rt := range Routes() {
		routed[rt.Method+" "+strings.ReplaceAll(rt.Pattern, "...}", "}")] = true
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("route %s is not in openapi.yaml", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("openapi.yaml documents %s, which the server does not route", k)
		}
	}
	// Every $ref points at something that exists.
	var raw map[string]any
	if err := yaml.Unmarshal(OpenAPI, &raw); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				var cur any = raw
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(raw)

	// And the live server answers each documented operation with a route
	// of its own, not the fallback.
	s, hs := newTestServer(t, nil)
	for k := range documented {
		method, path, _ := strings.Cut(k, " ")
		req := httptest.NewRequest(method, hs.URL+concrete(strings.ReplaceAll(path, "{ref}", "{ref...}")), nil)
		if _, pat := s.mux.Handler(req); pat == "" || pat == "/" {
			t.Errorf("documented %s reaches no route of the server", k)
		}
	}
	// The document is served.
	resp, data := do(t, http.MethodGet, hs.URL+"/v1/openapi.yaml", "Bearer "+testToken, "")
	if resp.StatusCode != http.StatusOK || string(data) != string(OpenAPI) {
		t.Fatalf("GET /v1/openapi.yaml: %d", resp.StatusCode)
	}
}

func TestErrorsAndLimits(t *testing.T) {
	dir := t.TempDir()
	_, hs := newTestServer(t, func(c *Config, h *sandbox.HostConfig) {
		c.MaxBodyBytes = 4096
		h.Policy.AllowedHostDirs = []string{dir}
	})
	auth := "Bearer " + testToken
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/v1/sandboxes", `{"image":`, 400, api.CodeBadRequest},
		{"unknown field", "POST", "/v1/sandboxes", `{"imag":"x"}`, 400, api.CodeBadRequest},
		{"trailing data", "POST", "/v1/sandboxes", `{"image":"x"} {}`, 400, api.CodeBadRequest},
		{"empty body", "POST", "/v1/sandboxes", ``, 400, api.CodeBadRequest},
		{"bad size", "POST", "/v1/sandboxes", `{"image":"x","limits":{"memory_bytes":"lots"}}`, 400, api.CodeBadRequest},
		{"too large", "POST", "/v1/sandboxes", `{"image":"` + strings.Repeat("x", 5000) + `"}`, 413, api.CodeTooLarge},
		{"image and rootfs", "POST", "/v1/sandboxes", `{"image":"x","rootfs":"` + dir + `"}`, 422, api.CodeInvalid},
		{"rootfs not allowed", "POST", "/v1/sandboxes", `{"rootfs":"/etc"}`, 422, api.CodeForbidden},
		{"rootfs escaping by ..", "POST", "/v1/sandboxes", `{"rootfs":"` + dir + `/../.."}`, 422, api.CodeForbidden},
		{"volume not allowed", "POST", "/v1/sandboxes", `{"image":"x","volumes":[{"host_path":"/","path":"/host"}]}`, 422, api.CodeForbidden},
		{"host network", "POST", "/v1/sandboxes", `{"image":"x","network":"host"}`, 422, api.CodeForbidden},
		{"cap_add", "POST", "/v1/sandboxes", `{"image":"x","cap_add":["SYS_ADMIN"]}`, 422, api.CodeForbidden},
		{"seccomp profile", "POST", "/v1/sandboxes", `{"image":"x","seccomp":"unconfined"}`, 422, api.CodeForbidden},
		{"cmd with NUL", "POST", "/v1/sandboxes", `{"image":"x","cmd":["sleep","1\u0000"]}`, 422, api.CodeInvalid},
		{"allow_host_ports", "POST", "/v1/sandboxes", `{"image":"x","network":"bridge","allow_host_ports":["22"]}`, 422, api.CodeForbidden},
		{"dns on loopback", "POST", "/v1/sandboxes", `{"image":"x","network":"bridge","dns":["127.0.0.53"]}`, 422, api.CodeForbidden},
		{"dns on a private address", "POST", "/v1/sandboxes", `{"image":"x","network":"bridge","dns":["1.1.1.1","10.0.0.2"]}`, 422, api.CodeForbidden},
		{"dns on link-local", "POST", "/v1/sandboxes", `{"image":"x","network":"bridge","dns":["169.254.169.254"]}`, 422, api.CodeForbidden},
		{"dns on a host address", "POST", "/v1/sandboxes", `{"image":"x","network":"bridge","dns":["` + hostGlobalAddr(t) + `"]}`, 422, api.CodeForbidden},
		{"negative ttl", "POST", "/v1/sandboxes", `{"rootfs":"` + dir + `","ttl":-5}`, 422, api.CodeInvalid},
		{"unknown sandbox", "GET", "/v1/sandboxes/0123456789abcdef", ``, 404, api.CodeNotFound},
		{"unknown sandbox exec", "POST", "/v1/sandboxes/nosuch/exec", `{"argv":["true"]}`, 404, api.CodeNotFound},
		{"unknown sandbox delete", "DELETE", "/v1/sandboxes/nosuch", ``, 404, api.CodeNotFound},
		{"bad label filter", "GET", "/v1/sandboxes?label==x", ``, 400, api.CodeBadRequest},
		{"bad force", "DELETE", "/v1/sandboxes/x?force=maybe", ``, 400, api.CodeBadRequest},
		{"no route", "GET", "/v2/anything", ``, 404, api.CodeNotFound},
		{"wrong method", "PATCH", "/v1/sandboxes", ``, 405, api.CodeMethod},
		{"unknown image", "GET", "/v1/images/nosuch:1", ``, 404, api.CodeNotFound},
		{"stop with a bad signal", "POST", "/v1/sandboxes/x/stop", `{"signal":"SIGNOPE"}`, 422, api.CodeInvalid},
		{"pull without ref", "POST", "/v1/images/pull", `{}`, 422, api.CodeInvalid},
		{"bad event id", "GET", "/v1/events?since=x", ``, 400, api.CodeBadRequest},
	}
	for _, c := range cases {
		resp, data := do(t, c.method, hs.URL+c.path, auth, c.body)
		if resp.StatusCode != c.status || errorCode(t, data) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, data, c.status, c.code)
		}
		if ct := resp.Header.Get("Content-Type"); ct != api.ContentTypeJSON {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
	}
}

// memImages is a backend whose images live in memory (the image cache
// itself is tested in imagecache and tests/); its sandboxes are a Host's.
type memImages struct {
	*sandbox.Host
	mu     sync.Mutex
	images map[string]sbx.Image
}

func (m *memImages) PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error) {
	if ref == "unreachable.example/x" {
		return nil, sbx.ErrRegistryUnreachable
	}
	for i := range 3 {
		if progress != nil {
			progress(sbx.PullProgress{Layer: "sha256:l" + string(rune('0'+i)), Index: i, Phase: "done", CurrentBytes: 10, TotalBytes: 10})
		}
	}
	img := sbx.Image{Name: ref, Digest: "sha256:abc", SizeBytes: 30}
	m.mu.Lock()
	m.images[ref] = img
	m.mu.Unlock()
	return &img, nil
}

func (m *memImages) ListImages(ctx context.Context) ([]sbx.Image, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sbx.Image
	for _, img := range m.images {
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memImages) RemoveImage(ctx context.Context, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.images[ref]; !ok {
		return sbx.ErrNotFound
	}
	delete(m.images, ref)
	return nil
}

func TestImageRoutes(t *testing.T) {
	_, hs, _ := newTestServerHost(t, nil, func(h *sandbox.Host) Backend { return &memImages{Host: h, images: map[string]sbx.Image{}} })
	c, err := client.New(hs.URL, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Through the client: plain, then with progress.
	img, err := c.PullImage(ctx, "example.com/a:1", nil)
	if err != nil || img.Name != "example.com/a:1" {
		t.Fatalf("pull: %+v %v", img, err)
	}
	var frames []sbx.PullProgress
	img, err = c.PullImage(ctx, "example.com/b:2", func(p sbx.PullProgress) { frames = append(frames, p) })
	if err != nil || img.Name != "example.com/b:2" || len(frames) != 3 {
		t.Fatalf("pull with progress: %+v %v, %d frames", img, err, len(frames))
	}
	if _, err := c.PullImage(ctx, "unreachable.example/x", func(sbx.PullProgress) {}); !client.IsCode(err, api.CodeRegistryUnreachable) || !errors.Is(err, sbx.ErrRegistryUnreachable) {
		t.Fatalf("failed pull with progress: %v", err)
	}
	list, err := c.ListImages(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.RemoveImage(ctx, "example.com/a:1"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveImage(ctx, "example.com/a:1"); client.StatusOf(err) != http.StatusNotFound || !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}

	// Raw HTTP: NDJSON asked by Accept.
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/images/pull", strings.NewReader(`{"ref":"example.com/c:3"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept", api.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if resp.Header.Get("Content-Type") != api.ContentTypeNDJSON || len(lines) != 4 {
		t.Fatalf("NDJSON pull: %s %q", resp.Header.Get("Content-Type"), data)
	}
	var last api.PullFrame
	if err := json.Unmarshal([]byte(lines[3]), &last); err != nil || last.Type != api.FrameResult || last.Image.Name != "example.com/c:3" {
		t.Fatalf("last frame %q: %v", lines[3], err)
	}
	resp2, data2 := do(t, http.MethodDelete, hs.URL+"/v1/images/example.com/c:3", "Bearer "+testToken, "")
	if resp2.StatusCode != http.StatusNoContent {
		t.Fatalf("raw delete: %d %s", resp2.StatusCode, data2)
	}

}

// streamBackend's Events replays its events after since, behind a reset
// when since is unknown, then ends: the server's SSE framing is under
// test, the event bus is sandbox's.
type streamBackend struct {
	*sandbox.Host
	events []sbx.Event
}

func (b *streamBackend) Events(ctx context.Context, since uint64, fn func(sbx.Event) error) error {
	if since > uint64(len(b.events)) {
		if err := fn(sbx.Event{Seq: 0, Type: sbx.EventReset}); err != nil {
			return err
		}
		since = 0
	}
	for _, e := range b.events[since:] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return sandbox.ErrEventsLagged
}

// LastEventSeq hides the Host's: since 0 means all of streamBackend's events.
func (b *streamBackend) LastEventSeq() uint64 { return 0 }

// lateBackend subscribes only after a delay, as a loaded host may, and
// delivers the events after since: "from now" (since 0) is what it holds
// when it subscribes.
type lateBackend struct {
	*sandbox.Host
	mu     sync.Mutex
	events []sbx.Event
}

func (b *lateBackend) add(typ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, sbx.Event{Seq: uint64(len(b.events) + 1), Type: typ})
}

func (b *lateBackend) LastEventSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uint64(len(b.events))
}

func (b *lateBackend) Events(ctx context.Context, since uint64, fn func(sbx.Event) error) error {
	time.Sleep(300 * time.Millisecond)
	b.mu.Lock()
	if since == 0 {
		since = uint64(len(b.events))
	}
	evs := append([]sbx.Event(nil), b.events[since:]...)
	b.mu.Unlock()
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestEventsStreamStartsWhenOpen: an event published after the stream's
// headers reached the client is delivered, however late the backend
// subscribes.
func TestEventsStreamStartsWhenOpen(t *testing.T) {
	b := &lateBackend{}
	b.add(sbx.EventCreated) // before the stream: not delivered
	_, hs, _ := newTestServerHost(t, nil, func(h *sandbox.Host) Backend { b.Host = h; return b })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b.add(sbx.EventRemoved) // once the stream is open
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "id: ") {
			if sc.Text() != "id: 2" {
				t.Fatalf("first event %q, want id: 2", sc.Text())
			}
			return
		}
	}
	t.Fatalf("the stream ended without the event published once it was open: %v", sc.Err())
}

func TestEventsStream(t *testing.T) {
	var evs []sbx.Event
	for i := range 500 {
		evs = append(evs, sbx.Event{Seq: uint64(i + 1), Type: sbx.EventCreated, Sandbox: "s" + string(rune('a'+i%26))})
	}
	_, hs, _ := newTestServerHost(t, nil, func(h *sandbox.Host) Backend { return &streamBackend{Host: h, events: evs} })
	c, err := client.New(hs.URL, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, since := range []uint64{0, 490, 9999} {
		var got []sbx.Event
		err := c.Events(ctx, since, func(e sbx.Event) error { got = append(got, e); return nil })
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("since %d: the stream ended with %v, want the server closing it", since, err)
		}
		want := evs
		if since == 490 {
			want = evs[490:]
		}
		if since == 9999 {
			want = append([]sbx.Event{{Type: sbx.EventReset}}, evs...)
		}
		if len(got) != len(want) {
			t.Fatalf("since %d: %d events, want %d", since, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type || got[i].Sandbox != want[i].Sandbox {
				t.Fatalf("since %d: event %d is %+v, want %+v", since, i, got[i], want[i])
			}
		}
	}
	// Raw SSE: ids and event names.
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Last-Event-ID", "498")
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != api.ContentTypeSSE || !strings.Contains(string(data), "id: 499\nevent: sandbox.created\ndata: {") ||
		!strings.Contains(string(data), "id: 500\n") || strings.Contains(string(data), "id: 498\n") {
		t.Fatalf("SSE after 498: %s %q", resp.Header.Get("Content-Type"), data)
	}
}

func TestMetricsMove(t *testing.T) {
	_, hs := newTestServer(t, nil)
	scrape := func() map[string]float64 {
		resp, data := do(t, http.MethodGet, hs.URL+"/metrics", "Bearer "+testToken, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("metrics: %d", resp.StatusCode)
		}
		out := map[string]float64{}
		for _, line := range strings.Split(string(data), "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			name, val := line[:i], line[i+1:]
			var f float64
			_ = json.Unmarshal([]byte(val), &f)
			out[name] = f
			if !strings.HasPrefix(name, "sbx_") {
				t.Errorf("metric %s lacks the sbx_ prefix", name)
			}
		}
		return out
	}
	before := scrape()
	for range 3 {
		do(t, http.MethodGet, hs.URL+"/v1/sandboxes/nosuch", "Bearer "+testToken, "")
	}
	do(t, http.MethodGet, hs.URL+"/v1/sandboxes", "Bearer nope", "")
	after := scrape()
	for name, delta := range map[string]float64{
		`sbx_http_requests_total{code="404",route="GET /v1/sandboxes/{id}"}`: 3,
		`sbx_errors_total{code="not_found"}`:                                 3,
		`sbx_errors_total{code="unauthorized"}`:                              1,
	} {
		if after[name]-before[name] != delta {
			t.Errorf("%s moved by %v, want %v (before %v)", name, after[name]-before[name], delta, before[name])
		}
	}
	if _, ok := after[`sbx_sandboxes{state="running"}`]; !ok {
		t.Errorf("sbx_sandboxes{state=running} missing")
	}
}

// hostGlobalAddr returns an address of one of the host's interfaces; a
// public-looking one when the host has it, else any.
func hostGlobalAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var any string
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok && n.IP.To4() != nil {
			a, _ := netip.AddrFromSlice(n.IP.To4())
			if !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
				return a.String()
			}
			any = a.String()
		}
	}
	if any == "" {
		t.Fatal("the host has no IPv4 address")
	}
	return any
}

// TestHostInfoAndGC calls GET /v1/info, POST /v1/gc and the errors of POST
// /v1/sandboxes/{id}/commit over raw HTTP: the configured host facts, the
// server's own without them, and an empty garbage collection of a fresh
// root.
func TestHostInfoAndGC(t *testing.T) {
	_, hs, h := newTestServerHost(t, nil, nil)
	resp, data := do(t, http.MethodGet, hs.URL+"/v1/info", "Bearer "+testToken, "")
	var info api.HostInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &info) != nil || info.Kernel == "" || info.CgroupMode == "" || info.Root != h.Root() {
		t.Fatalf("GET /v1/info: %d %s", resp.StatusCode, data)
	}
	resp, data = do(t, http.MethodPost, hs.URL+"/v1/gc", "Bearer "+testToken, "")
	var rep api.GCReport
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &rep) != nil || len(rep.Expired)+len(rep.Interrupted)+len(rep.Stopped)+len(rep.Orphans) != 0 {
		t.Fatalf("POST /v1/gc: %d %s", resp.StatusCode, data)
	}
	if resp, _ = do(t, http.MethodGet, hs.URL+"/v1/gc", "Bearer "+testToken, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/gc: %d, want 405", resp.StatusCode)
	}
	// Commit: a name is required (422); the sandbox must exist (404).
	for body, want := range map[string]int{`{}`: 422, `{"name":"x:1"}`: 404, `{"name":1}`: 400} {
		if resp, data = do(t, http.MethodPost, hs.URL+"/v1/sandboxes/nosuch/commit", "Bearer "+testToken, body); resp.StatusCode != want {
			t.Errorf("POST commit %s: %d %s, want %d", body, resp.StatusCode, data, want)
		}
	}
}
