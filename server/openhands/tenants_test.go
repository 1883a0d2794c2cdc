package openhands

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// fakeBackend has no sandboxes; DialPort reaches dial (a test server
// standing in for the Agent Server).
type fakeBackend struct{ dial string }

var errFake = errors.New("fake backend")

func (f *fakeBackend) Create(context.Context, sbx.Options) (*sbx.Sandbox, error) { return nil, errFake }
func (f *fakeBackend) Get(context.Context, string) (*sbx.Sandbox, error)         { return nil, sbx.ErrNotFound }
func (f *fakeBackend) Pause(context.Context, string) (*sbx.Sandbox, error)       { return nil, errFake }
func (f *fakeBackend) Resume(context.Context, string) (*sbx.Sandbox, error)      { return nil, errFake }
func (f *fakeBackend) Remove(context.Context, string, sbx.RemoveOptions) error   { return nil }
func (f *fakeBackend) Dial(context.Context, string) (net.Conn, error)            { return nil, errFake }
func (f *fakeBackend) DialPort(ctx context.Context, _ string, _ int) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, "tcp", f.dial)
}
func (f *fakeBackend) PullImage(context.Context, string, func(sbx.PullProgress)) (*sbx.Image, error) {
	return nil, errFake
}
func (f *fakeBackend) InspectImage(context.Context, string) (*sbx.Image, error) { return nil, errFake }

const (
	keyA        = "key-of-app-server-a-0123456789abcdef"
	keyB        = "key-of-app-server-b-0123456789abcdef"
	serverToken = "token-of-the-sbx-rest-server-0123456789"
)

func newTenantService(t *testing.T, dial string) (*Service, http.Handler) {
	t.Helper()
	s, err := New(&fakeBackend{dial: dial}, Config{APIKey: keyA, APIKeys: []string{keyB}, ServerTokens: []string{serverToken},
		PublicURL: "http://sbx.test", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, s.Handler()
}

func call(t *testing.T, h http.Handler, method, path, key, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("X-API-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestRuntimeAPIKeysSeeOnlyTheirRuntimes: with a key per app server, a key
// neither lists, reads (session key included), stops, pauses nor resumes
// another key's runtime, nor takes over its session id.
func TestRuntimeAPIKeysSeeOnlyTheirRuntimes(t *testing.T) {
	_, h := newTenantService(t, "127.0.0.1:1")
	code, body := call(t, h, "POST", "/start", keyA, `{"image":"agent:1","session_id":"s-a"}`)
	if code != http.StatusOK {
		t.Fatalf("start with key A: %d %s", code, body)
	}
	var rt Runtime
	if err := json.Unmarshal([]byte(body), &rt); err != nil || rt.RuntimeID == "" {
		t.Fatalf("start reply %s: %v", body, err)
	}
	if code, body := call(t, h, "GET", "/list", keyB, ""); code != http.StatusOK || strings.Contains(body, rt.RuntimeID) || strings.Contains(body, rt.SessionAPIKey) {
		t.Errorf("key B lists key A's runtime: %d %s", code, body)
	}
	if code, body := call(t, h, "GET", "/sessions/s-a", keyB, ""); code != http.StatusNotFound || strings.Contains(body, rt.SessionAPIKey) {
		t.Errorf("key B reads key A's session: %d %s", code, body)
	}
	if code, body := call(t, h, "GET", "/sessions/batch?ids=s-a", keyB, ""); code != http.StatusOK || strings.Contains(body, rt.RuntimeID) {
		t.Errorf("key B reads key A's session in a batch: %d %s", code, body)
	}
	for _, op := range []string{"/stop", "/pause", "/resume"} {
		if code, body := call(t, h, "POST", op, keyB, `{"runtime_id":"`+rt.RuntimeID+`"}`); code != http.StatusNotFound {
			t.Errorf("key B %s key A's runtime: %d %s", op, code, body)
		}
	}
	if code, body := call(t, h, "POST", "/start", keyB, `{"image":"agent:1","session_id":"s-a"}`); code != http.StatusConflict || strings.Contains(body, rt.SessionAPIKey) {
		t.Errorf("key B starts key A's session: %d %s", code, body)
	}
	if code, body := call(t, h, "GET", "/sessions/s-a", keyA, ""); code != http.StatusOK || !strings.Contains(body, rt.RuntimeID) {
		t.Errorf("key A reads its own session: %d %s", code, body)
	}
	if code, _ := call(t, h, "GET", "/list", "wrong-key-0123456789abcdef0123456789", ""); code != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d", code)
	}
}

// TestDataPlaneStripsSbxCredentials: what the data plane forwards into a
// sandbox carries none of sbx's own credentials (the API keys in
// X-API-Key, Authorization or a cookie; the REST server's bearer token),
// and keeps the Agent Server's session key and other cookies.
func TestDataPlaneStripsSbxCredentials(t *testing.T) {
	got := make(chan http.Header, 1)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		io.WriteString(w, "ok")
	}))
	defer agent.Close()
	s, h := newTenantService(t, strings.TrimPrefix(agent.URL, "http://"))
	s.mu.Lock()
	s.byID["rt-x"] = &runtime{RuntimeID: "rt-x", SessionID: "s-x", Status: StatusRunning, SandboxID: "sb-x", Owner: s.tenants[0].id}
	s.mu.Unlock()
	for _, auth := range []string{"Bearer " + serverToken, "Bearer " + keyB} {
		r := httptest.NewRequest("GET", "/rt-x/api/conversations", nil)
		r.Header.Set("X-API-Key", keyA)
		r.Header.Set("Authorization", auth)
		r.Header.Set("Cookie", "theme=dark; sbx="+keyA)
		r.Header.Set("X-Session-API-Key", "session-key")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("data plane: %d %s", w.Code, w.Body.String())
		}
		hdr := <-got
		for name, v := range hdr {
			for _, secret := range []string{keyA, keyB, serverToken} {
				if strings.Contains(strings.Join(v, " "), secret) {
					t.Errorf("forwarded %s carries a credential of sbx: %q", name, v)
				}
			}
		}
		if hdr.Get("X-Session-API-Key") != "session-key" || hdr.Get("Cookie") != "theme=dark" {
			t.Errorf("the Agent Server's own headers were changed: %v", hdr)
		}
	}
}
