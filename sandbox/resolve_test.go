package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// newStateOnly returns a Host over an empty temporary state, for tests
// that need no root and no container.
func newStateOnly(t *testing.T) *Host {
	t.Helper()
	dir := shortTempDir(t)
	m, err := open(HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// put writes a record as a create would.
func put(t *testing.T, m *Host, sb sbx.Sandbox) {
	t.Helper()
	l, err := m.store.Create(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if sb.Name != "" {
		if err := m.store.ClaimName(sb.Name, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Write(&sb); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	m := newStateOnly(t)
	a := "aaaa" + strings.Repeat("0", 28)
	b := "aaab" + strings.Repeat("0", 28)
	put(t, m, sbx.Sandbox{ID: a, Name: "alpha", Status: sbx.StatusStopped})
	put(t, m, sbx.Sandbox{ID: b, Status: sbx.StatusStopped})
	for ref, want := range map[string]string{a: a, "alpha": a, "aaab": b, b[:12]: b} {
		if got, err := m.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := m.Resolve("aaa"); !errors.Is(err, sbx.ErrAmbiguous) {
		t.Errorf("ambiguous prefix: %v", err)
	}
	for _, ref := range []string{"", "nothere", "ffff", "../x", strings.Repeat("a", 40)} {
		if _, err := m.Resolve(ref); err == nil {
			t.Errorf("Resolve(%q) succeeded", ref)
		}
	}
}

func TestListFilters(t *testing.T) {
	m := newStateOnly(t)
	ids := []string{state.NewID(), state.NewID(), state.NewID()}
	put(t, m, sbx.Sandbox{ID: ids[0], Status: sbx.StatusStopped, Options: sbx.Options{Labels: map[string]string{"team": "a", "env": "ci"}}})
	put(t, m, sbx.Sandbox{ID: ids[1], Status: sbx.StatusStopped, Options: sbx.Options{Labels: map[string]string{"team": "b"}}})
	put(t, m, sbx.Sandbox{ID: ids[2], Status: sbx.StatusCreating})
	ctx := context.Background()
	count := func(f sbx.Filter) int {
		list, err := m.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	var byLabel sbx.Filter
	if err := byLabel.ParseLabel("team=a"); err != nil {
		t.Fatal(err)
	}
	var byKey sbx.Filter
	_ = byKey.ParseLabel("team")
	for name, c := range map[string]struct {
		f    sbx.Filter
		want int
	}{
		"all":          {sbx.Filter{}, 3},
		"label value":  {byLabel, 1},
		"label key":    {byKey, 2},
		"two labels":   {sbx.Filter{Labels: map[string]string{"team": "a", "env": "ci"}}, 1},
		"status":       {sbx.Filter{Status: sbx.StatusStopped}, 2},
		"running only": {sbx.Filter{Running: true}, 1}, // the creating one
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: %d sandboxes, want %d", name, got, c.want)
		}
	}
	var bad sbx.Filter
	if err := bad.ParseLabel("=x"); !errors.Is(err, sbx.ErrInvalid) {
		t.Errorf("label filter =x: %v", err)
	}
}

// A run root too long for executor sockets fails creates clearly, before
// anything is made; the host still opens (runs and the network need no
// socket).
func TestRunRootTooLong(t *testing.T) {
	dir := t.TempDir()
	// Reachable, as private user namespaces (the default) need.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	h, err := open(HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, strings.Repeat("r", 80))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Create(context.Background(), sbx.Options{Rootfs: dir})
	if !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("create under a long run root: %v", err)
	}
	if ids, _ := h.store.IDs(); len(ids) != 0 {
		t.Fatalf("a refused create left records: %v", ids)
	}
}
