package server

import (
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

	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
)

const testToken = "s3cret-token-0123456789abcdef"

// newTestServer builds a server over a Manager with a private state
// directory. No sandbox is started by these tests; the integration tests
// in tests/ run real ones.
func newTestServer(t *testing.T, mutate func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxsrv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	m, err := sandbox.New(sandbox.Config{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Executor: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Manager: m, Token: testToken, WatchInterval: 50 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
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
	})
	return s, hs
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
	_, hs := newTestServer(t, func(c *Config) { c.Token = "" })
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
	_, hs := newTestServer(t, func(c *Config) {
		c.MaxBodyBytes = 4096
		c.AllowedHostDirs = []string{dir}
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
		{"bad size", "POST", "/v1/sandboxes", `{"image":"x","limits":{"memory":"lots"}}`, 400, api.CodeBadRequest},
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
		{"no image store", "GET", "/v1/images", ``, 503, api.CodeUnavailable},
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

// memImages is an in-memory ImageStore for the route tests; the image
// cache itself is tested in imagecache and tests/.
type memImages struct {
	mu     sync.Mutex
	images map[string]api.Image
}

func (m *memImages) Pull(ctx context.Context, ref string, progress func(api.PullProgress)) (api.Image, error) {
	if ref == "unreachable.example/x" {
		return api.Image{}, &StatusError{Status: http.StatusBadGateway, Code: "unreachable", Message: "registry unreachable"}
	}
	for i := range 3 {
		if progress != nil {
			progress(api.PullProgress{Layer: "sha256:l" + string(rune('0'+i)), Index: i, Phase: "done", Current: 10, Total: 10})
		}
	}
	img := api.Image{Name: ref, Digest: "sha256:abc", Size: 30}
	m.mu.Lock()
	m.images[ref] = img
	m.mu.Unlock()
	return img, nil
}

func (m *memImages) List(ctx context.Context) ([]api.Image, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []api.Image
	for _, img := range m.images {
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memImages) Remove(ctx context.Context, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.images[ref]; !ok {
		return &StatusError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: "image " + ref + " is not in the cache"}
	}
	delete(m.images, ref)
	return nil
}

func TestImageRoutes(t *testing.T) {
	_, hs := newTestServer(t, func(c *Config) { c.Images = &memImages{images: map[string]api.Image{}} })
	c, err := client.New(hs.URL, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	events := make(chan api.Event, 16)
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Events(ectx, 0, func(e api.Event) error { events <- e; return nil }) }()
	time.Sleep(100 * time.Millisecond)

	// Through the client: plain, then with progress.
	img, err := c.PullImage(ctx, "example.com/a:1", nil)
	if err != nil || img.Name != "example.com/a:1" {
		t.Fatalf("pull: %+v %v", img, err)
	}
	var frames []api.PullProgress
	img, err = c.PullImage(ctx, "example.com/b:2", func(p api.PullProgress) { frames = append(frames, p) })
	if err != nil || img.Name != "example.com/b:2" || len(frames) != 3 {
		t.Fatalf("pull with progress: %+v %v, %d frames", img, err, len(frames))
	}
	if _, err := c.PullImage(ctx, "unreachable.example/x", func(api.PullProgress) {}); !client.IsCode(err, "unreachable") {
		t.Fatalf("failed pull with progress: %v", err)
	}
	list, err := c.ListImages(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.RemoveImage(ctx, "example.com/a:1"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveImage(ctx, "example.com/a:1"); client.StatusOf(err) != http.StatusNotFound {
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

	want := []string{api.EventImagePulled, api.EventImagePulled, api.EventImageRemove, api.EventImagePulled, api.EventImageRemove}
	for i, w := range want {
		select {
		case e := <-events:
			if e.Type != w {
				t.Fatalf("event %d: %s, want %s", i, e.Type, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d (%s) did not arrive", i, w)
		}
	}
}

func TestEventsStreamInOrder(t *testing.T) {
	s, hs := newTestServer(t, nil)
	c, err := client.New(hs.URL, client.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const publishers, each = 8, 200
	got := make(chan []api.Event, 2)
	ready := make(chan struct{}, 2)
	for range 2 { // two independent subscribers see the same order
		go func() {
			var evs []api.Event
			first := true
			err := c.Events(ctx, 0, func(e api.Event) error {
				if first {
					first = false
				}
				evs = append(evs, e)
				if len(evs) == publishers*each+1 {
					return errDone
				}
				return nil
			})
			if !errors.Is(err, errDone) {
				t.Errorf("events: %v after %d", err, len(evs))
			}
			got <- evs
		}()
		_ = ready
	}
	// Wait until both streams are subscribed, then mark the start.
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.events.mu.Lock()
		n := len(s.events.subs)
		s.events.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("subscribers did not connect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.events.publish(api.Event{Type: "test.start"})
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				s.events.publish(api.Event{Type: "test", Sandbox: string(rune('a' + p)), OOMKills: uint64(i)})
			}
		}()
	}
	wg.Wait()
	var streams [][]api.Event
	for range 2 {
		streams = append(streams, <-got)
	}
	for si, evs := range streams {
		if len(evs) != publishers*each+1 {
			t.Fatalf("stream %d: %d events", si, len(evs))
		}
		next := map[string]uint64{}
		for i, e := range evs {
			if i > 0 && e.Seq != evs[i-1].Seq+1 {
				t.Fatalf("stream %d: seq %d after %d", si, e.Seq, evs[i-1].Seq)
			}
			if e.Type != "test" {
				continue
			}
			if e.OOMKills != next[e.Sandbox] {
				t.Fatalf("stream %d: publisher %s event %d arrived when %d was due", si, e.Sandbox, e.OOMKills, next[e.Sandbox])
			}
			next[e.Sandbox]++
		}
	}
	for i := range streams[0] {
		if streams[0][i] != streams[1][i] {
			t.Fatalf("the two streams differ at %d", i)
		}
	}
	// A reconnect with Last-Event-ID replays exactly what came after it.
	lastSeq := streams[0][len(streams[0])-1].Seq
	s.events.publish(api.Event{Type: "after"})
	var replay []api.Event
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	_ = c.Events(rctx, lastSeq, func(e api.Event) error { replay = append(replay, e); return errDone })
	if len(replay) != 1 || replay[0].Type != "after" || replay[0].Seq != lastSeq+1 {
		t.Fatalf("replay after %d: %+v", lastSeq, replay)
	}
}

var errDone = errors.New("done")

func TestTrackerTransitions(t *testing.T) {
	bus := newEventBusAt(64, 0)
	tr := newTracker(bus, newMetrics())
	tr.seed(nil)
	_, sub := bus.subscribe(0, false)
	sb := &sandbox.Sandbox{ID: "a", Status: sandbox.StatusRunning}
	step := func(st sandbox.Status) { c := *sb; c.Status = st; tr.observe(&c) }
	step(sandbox.StatusRunning)
	step(sandbox.StatusPaused)
	step(sandbox.StatusRunning)
	step(sandbox.StatusStopped)
	step(sandbox.StatusRunning)
	tr.oomKills(sb, 2)
	tr.gone("a")
	tr.gone("a")
	// A listing taken before the removal does not bring it back.
	tr.sync([]*sandbox.Sandbox{sb}, time.Now().Add(-time.Second))
	// One made elsewhere appears; one that vanished is removed.
	tr.sync([]*sandbox.Sandbox{{ID: "b", Status: sandbox.StatusCreating}}, time.Now())
	tr.sync([]*sandbox.Sandbox{{ID: "b", Status: sandbox.StatusRunning}}, time.Now())
	tr.sync(nil, time.Now())
	want := []string{api.EventCreated, api.EventReady, api.EventPaused, api.EventResumed, api.EventExited, api.EventStarted,
		api.EventOOM, api.EventRemoved, api.EventCreated, api.EventReady, api.EventRemoved}
	for i, w := range want {
		select {
		case e := <-sub.ch:
			if e.Type != w || e.Seq != uint64(i+1) {
				t.Fatalf("event %d: %s seq %d, want %s seq %d", i, e.Type, e.Seq, w, i+1)
			}
		default:
			t.Fatalf("event %d (%s) missing", i, w)
		}
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
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

func TestManagerEventsForwarded(t *testing.T) {
	var fwd ManagerEvents
	fwd.Handle(sandbox.Event{Type: sandbox.EventCreated, ID: "early"}) // before the server: dropped
	s, _ := newTestServer(t, func(c *Config) { c.ManagerEvents = &fwd; c.WatchInterval = time.Hour })
	_, sub := s.events.subscribe(s.events.last(), false)
	for _, typ := range []string{sandbox.EventCreated, sandbox.EventReady, sandbox.EventPaused, sandbox.EventResumed,
		sandbox.EventStopped, sandbox.EventStarted, sandbox.EventExpired, sandbox.EventRemoved} {
		fwd.Handle(sandbox.Event{Type: typ, ID: "x", Name: "n"})
	}
	// The server's own report of the same change adds nothing.
	s.tracker.gone("x")
	want := []string{api.EventCreated, api.EventReady, api.EventPaused, api.EventResumed, api.EventExited, api.EventStarted, api.EventRemoved}
	for i, w := range want {
		select {
		case e := <-sub.ch:
			if e.Type != w || e.Sandbox != "x" || e.Name != "n" {
				t.Fatalf("event %d: %+v, want %s", i, e, w)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("event %d (%s) missing", i, w)
		}
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestEventIDsSurviveRestart checks that a restarted server's ids follow
// its predecessor's and that a client naming an id the server does not
// hold gets a reset event before the buffered events.
func TestEventIDsSurviveRestart(t *testing.T) {
	old := newEventBus(4)
	for range 3 {
		old.publish(api.Event{Type: "old"})
	}
	lastOld := old.last()
	time.Sleep(2 * time.Millisecond)
	bus := newEventBus(4)
	bus.publish(api.Event{Type: "new"})
	if bus.last() <= lastOld {
		t.Fatalf("restarted bus numbers from %d, not after the old bus's %d", bus.last(), lastOld)
	}
	types := func(evs []api.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	check := func(name string, since uint64, want ...string) {
		t.Helper()
		replay, sub := bus.subscribe(since, true)
		bus.unsubscribe(sub)
		if got := types(replay); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s (since %d): %v, want %v", name, since, got, want)
		}
		if len(replay) > 1 && replay[0].Type == api.EventReset && replay[0].Seq != replay[1].Seq-1 {
			t.Errorf("%s: reset id %d does not precede the replay's %d", name, replay[0].Seq, replay[1].Seq)
		}
	}
	check("id of the previous server", lastOld, api.EventReset, "new")
	check("id from the future", bus.last()+10, api.EventReset, "new")
	check("newest id", bus.last())
	check("id before the first event", bus.last()-1, "new")
	for range 5 { // the buffer of 4 drops the first two events
		bus.publish(api.Event{Type: "more"})
	}
	check("id older than the buffer", bus.last()-5, api.EventReset, "more", "more", "more", "more")
	check("oldest buffered", bus.last()-4, "more", "more", "more", "more")

	// Over HTTP: the reset event comes first, with an id.
	s, hs := newTestServer(t, nil)
	s.events.publish(api.Event{Type: "x"})
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Last-Event-ID", "17")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var got string
	for !strings.Contains(got, "event: x") {
		n, err := resp.Body.Read(buf)
		got += string(buf[:n])
		if err != nil {
			t.Fatalf("stream ended: %v: %q", err, got)
		}
	}
	if !strings.Contains(got, "event: reset\n") || strings.Index(got, "event: reset") > strings.Index(got, "event: x") {
		t.Fatalf("no reset before the replay: %q", got)
	}
}

// TestRemovalsBeforeSeedArePublished checks that the Manager's report of a
// sandbox removed while the server starts (a TTL that passed while no
// server ran) becomes a sandbox.removed event, once.
func TestRemovalsBeforeSeedArePublished(t *testing.T) {
	bus := newEventBusAt(16, 0)
	tr := newTracker(bus, newMetrics())
	_, sub := bus.subscribe(0, false)
	tr.goneNamed("expired", "ttl")
	tr.goneNamed("expired", "ttl")
	tr.seed(nil)
	tr.goneNamed("unknown", "") // after seeding, unknown ids are not reported
	select {
	case e := <-sub.ch:
		if e.Type != api.EventRemoved || e.Sandbox != "expired" || e.Name != "ttl" {
			t.Fatalf("event %+v", e)
		}
	default:
		t.Fatal("no sandbox.removed for the sandbox removed at start")
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
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
			if !netns.PrivateAddr(a) {
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

func TestDNSAllowedWithHostNetwork(t *testing.T) {
	_, hs := newTestServer(t, func(c *Config) { c.AllowHostNetwork = true })
	resp, data := do(t, "POST", hs.URL+"/v1/sandboxes", "Bearer "+testToken, `{"image":"x","network":"bridge","dns":["127.0.0.53"]}`)
	if errorCode(t, data) == api.CodeForbidden {
		t.Fatalf("dns 127.0.0.53 refused with --allow-host-network: %d %s", resp.StatusCode, data)
	}
	_, hs = newTestServer(t, nil)
	resp, data = do(t, "POST", hs.URL+"/v1/sandboxes", "Bearer "+testToken, `{"image":"x","network":"bridge","dns":["1.1.1.1"]}`)
	if errorCode(t, data) == api.CodeForbidden {
		t.Fatalf("public dns refused: %d %s", resp.StatusCode, data)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"echo", "it's", "$HOME", "a b", ""})
	if want := `'echo' 'it'\''s' '$HOME' 'a b' ''`; got != want {
		t.Fatalf("shellJoin: %s, want %s", got, want)
	}
}

// TestHostInfoAndGC calls GET /v1/info, POST /v1/gc and the errors of POST
// /v1/sandboxes/{id}/commit over raw HTTP: the configured host facts, the
// server's own without them, and an empty garbage collection of a fresh
// root.
func TestHostInfoAndGC(t *testing.T) {
	_, hs := newTestServer(t, func(c *Config) {
		c.HostInfo = func() api.HostInfo { return api.HostInfo{Version: "v-test", Root: "/srv/sbx"} }
	})
	resp, data := do(t, http.MethodGet, hs.URL+"/v1/info", "Bearer "+testToken, "")
	var info api.HostInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &info) != nil || info.Version != "v-test" || info.Root != "/srv/sbx" {
		t.Fatalf("GET /v1/info: %d %s", resp.StatusCode, data)
	}
	_, hs = newTestServer(t, nil)
	resp, data = do(t, http.MethodGet, hs.URL+"/v1/info", "Bearer "+testToken, "")
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &info) != nil || info.Kernel == "" || info.CgroupMode == "" {
		t.Fatalf("GET /v1/info without HostInfo: %d %s", resp.StatusCode, data)
	}
	resp, data = do(t, http.MethodPost, hs.URL+"/v1/gc", "Bearer "+testToken, "")
	var rep api.GCReport
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &rep) != nil || len(rep.Expired)+len(rep.Interrupted)+len(rep.Stopped)+len(rep.Orphans) != 0 {
		t.Fatalf("POST /v1/gc: %d %s", resp.StatusCode, data)
	}
	if resp, _ = do(t, http.MethodGet, hs.URL+"/v1/gc", "Bearer "+testToken, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/gc: %d, want 405", resp.StatusCode)
	}
	// Commit: a name is required; this Manager has no image store (422).
	for body, want := range map[string]int{`{}`: 422, `{"name":"x:1"}`: 422, `{"name":1}`: 400} {
		if resp, data = do(t, http.MethodPost, hs.URL+"/v1/sandboxes/nosuch/commit", "Bearer "+testToken, body); resp.StatusCode != want {
			t.Errorf("POST commit %s: %d %s, want %d", body, resp.StatusCode, data, want)
		}
	}
}
