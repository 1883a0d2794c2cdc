package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/sandbox/state"
)

// newStateOnly returns a Manager over an empty temporary state, for tests
// that need no root and no container.
func newStateOnly(t *testing.T) *Manager {
	t.Helper()
	dir := shortTempDir(t)
	m, err := New(Config{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// put writes a record as a create would.
func put(t *testing.T, m *Manager, sb Sandbox) {
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
	put(t, m, Sandbox{ID: a, Name: "alpha", Status: StatusStopped})
	put(t, m, Sandbox{ID: b, Status: StatusStopped})
	for ref, want := range map[string]string{a: a, "alpha": a, "aaab": b, b[:12]: b} {
		if got, err := m.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := m.Resolve("aaa"); !errors.Is(err, ErrAmbiguous) {
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
	put(t, m, Sandbox{ID: ids[0], Status: StatusStopped, Options: Options{Labels: map[string]string{"team": "a", "env": "ci"}}})
	put(t, m, Sandbox{ID: ids[1], Status: StatusStopped, Options: Options{Labels: map[string]string{"team": "b"}}})
	put(t, m, Sandbox{ID: ids[2], Status: StatusCreating})
	ctx := context.Background()
	count := func(f Filter) int {
		list, err := m.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	var byLabel Filter
	if err := byLabel.ParseLabelFilter("team=a"); err != nil {
		t.Fatal(err)
	}
	var byKey Filter
	_ = byKey.ParseLabelFilter("team")
	for name, c := range map[string]struct {
		f    Filter
		want int
	}{
		"all":          {Filter{}, 3},
		"label value":  {byLabel, 1},
		"label key":    {byKey, 2},
		"two labels":   {Filter{Labels: map[string]string{"team": "a", "env": "ci"}}, 1},
		"status":       {Filter{Status: StatusStopped}, 2},
		"running only": {Filter{Running: true}, 1}, // the creating one
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: %d sandboxes, want %d", name, got, c.want)
		}
	}
	var bad Filter
	if err := bad.ParseLabelFilter("=x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("label filter =x: %v", err)
	}
}

func TestRunRootTooLong(t *testing.T) {
	dir := t.TempDir()
	_, err := New(Config{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, strings.Repeat("r", 80))})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("long run root: %v", err)
	}
}
