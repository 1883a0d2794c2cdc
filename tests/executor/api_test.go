package executor

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/executor/api"
)

// TestExecutorWrongMethodAndSignalField: a known path with the wrong
// method is 405 with Allow; an unknown path is 404; an exec reply always
// carries "signal".
func TestExecutorWrongMethodAndSignalField(t *testing.T) {
	e := startExecutor(t)
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, api.PathExec, "POST"},
		{http.MethodDelete, api.PathFiles, "GET, PUT"},
		{http.MethodPost, api.PathHealth, "GET"},
		{http.MethodGet, api.PathSessions + "/abc/run", "POST"},
	} {
		resp, body := rawRequest(t, e.socket, c.method, c.path, "")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow || !strings.Contains(body, api.CodeMethodNotAllowed) {
			t.Fatalf("%s %s: %d Allow=%q %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if resp, body := rawRequest(t, e.socket, http.MethodGet, "/v1/nothing-here", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, body)
	}
	resp, body := rawRequest(t, e.socket, http.MethodPost, api.PathExec, `{"argv":["true"]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"signal":""`) {
		t.Fatalf("exec reply without signal: %d %s", resp.StatusCode, body)
	}
	resp, body = rawRequest(t, e.socket, http.MethodPost, api.PathExec, `{"command":"kill -9 $$"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"signal":"SIGKILL"`) {
		t.Fatalf("exec reply of a killed command: %d %s", resp.StatusCode, body)
	}
}
