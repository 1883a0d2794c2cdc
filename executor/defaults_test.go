package executor

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbxrun/sbx/executor/api"
)

// TestClaimDefaultsApplyBeforeTheNextRequest: a pool member's executor
// keeps its start defaults while the claim defaults file is empty; once
// the host has written the claimant's defaults into it, the next request
// sees them (its working directory made), and the file is let go. A file
// that does not hold a whole JSON object yet, or defaults that cannot be
// applied, fail the request and change nothing; the next request tries
// again.
func TestClaimDefaultsApplyBeforeTheNextRequest(t *testing.T) {
	dir := t.TempDir()
	w, err := os.Create(filepath.Join(dir, "claim-defaults")) // the host's side
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f, err := os.Open(w.Name())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Env: []string{"POOL=1"}, Workdir: dir, ScratchDir: filepath.Join(dir, "scratch"), ClaimDefaults: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	h := s.Handler()
	health := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.PathHealth, nil))
		return rec.Code
	}
	if code := health(); code != http.StatusOK || !slices.Equal(s.env(), []string{"POOL=1"}) {
		t.Fatalf("before the claim: %d, env %v", code, s.env())
	}
	wd := filepath.Join(dir, "work", "dir")
	write := func(data string) {
		t.Helper()
		if err := w.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteAt([]byte(data), 0); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"env":["TASK=7"],"workdir":"` + wd)
	if code := health(); code == http.StatusOK || !slices.Equal(s.env(), []string{"POOL=1"}) {
		t.Fatalf("half-written defaults: %d, env %v", code, s.env())
	}
	write(`{"env":["TASK=7"],"workdir":"` + wd + `","user":"nosuchuser"}`)
	if code := health(); code != http.StatusBadRequest || !slices.Equal(s.env(), []string{"POOL=1"}) {
		t.Fatalf("a user the sandbox lacks: %d, env %v", code, s.env())
	}
	write(`{"env":["TASK=7"],"workdir":"` + wd + `"}`)
	if code := health(); code != http.StatusOK {
		t.Fatalf("after the claim: %d", code)
	}
	if !slices.Equal(s.env(), []string{"TASK=7"}) || s.defaultWorkdir() != wd {
		t.Fatalf("defaults after the claim: env %v, workdir %s", s.env(), s.defaultWorkdir())
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		t.Fatalf("working directory not made: %v", err)
	}
	if s.claimDefaults.Load() != nil {
		t.Fatal("the claim defaults file is still held after it was applied")
	}
	write(`{"env":["LATER=1"]}`)
	if code := health(); code != http.StatusOK || !slices.Equal(s.env(), []string{"TASK=7"}) {
		t.Fatalf("a second write changed the defaults: %d, env %v", code, s.env())
	}
}
