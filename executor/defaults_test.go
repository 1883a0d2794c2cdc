package executor

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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

// TestClaimDefaultsNotInherited: the claim defaults descriptor, which the
// executor inherits from the host without close-on-exec, is marked
// close-on-exec, so that no command the executor starts (a template's
// main command, a session) holds the file the claim writes into.
func TestClaimDefaultsNotInherited(t *testing.T) {
	fd, err := unix.MemfdCreate("claim-defaults", 0) // as inherited: no close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "claim-defaults")
	dir := t.TempDir()
	s, err := New(Config{Workdir: dir, ScratchDir: filepath.Join(dir, "scratch"), ClaimDefaults: f})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("the claim defaults descriptor is inherited by the executor's commands (no FD_CLOEXEC)")
	}
}

// TestClaimDefaultsWithAFileAsWorkdir: claim defaults whose working
// directory is a file still apply (the environment and the directory
// become the defaults, the file is let go) and requests are served,
// rather than every request failing from then on.
func TestClaimDefaultsWithAFileAsWorkdir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "claim-defaults")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"env":["TASK=7"],"workdir":"` + file + `"}`); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Workdir: dir, ScratchDir: filepath.Join(dir, "scratch"), ClaimDefaults: f})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	h := s.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.PathHealth, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("a request after the claim: %d %s", rec.Code, rec.Body)
	}
	if !slices.Equal(s.env(), []string{"TASK=7"}) || s.defaultWorkdir() != file || s.claimDefaults.Load() != nil {
		t.Fatalf("defaults after the claim: env %v, workdir %s, file held %v", s.env(), s.defaultWorkdir(), s.claimDefaults.Load() != nil)
	}
}

// TestDefaultsHaveNoEndpoint: the defaults change only through the
// claim's descriptor; a request (anything in the sandbox can make one)
// cannot replace them.
func TestDefaultsHaveNoEndpoint(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Env: []string{"A=1"}, Workdir: dir, ScratchDir: filepath.Join(dir, "scratch")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/v1/defaults", strings.NewReader(`{"env":["A=2"],"workdir":"/"}`)))
	if rec.Code != http.StatusNotFound {
		t.Errorf("PUT /v1/defaults: %d %s, want 404", rec.Code, rec.Body)
	}
	if !slices.Equal(s.env(), []string{"A=1"}) || s.defaultWorkdir() != dir {
		t.Fatalf("defaults after PUT /v1/defaults: env %v, workdir %s; want them unchanged", s.env(), s.defaultWorkdir())
	}
}
