package executor

import (
	"os"
	"path/filepath"
	"testing"
)

// The OOM kill count is read from cgroup v2's memory.events and from
// cgroup v1's memory.oom_control alike.
func TestReadOOMKill(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		text string
		want uint64
		ok   bool
	}{
		"memory.events":      {"low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n", 2, true},
		"memory.oom_control": {"oom_kill_disable 0\nunder_oom 0\noom_kill 5\n", 5, true},
		"old.oom_control":    {"oom_kill_disable 0\nunder_oom 0\n", 0, false},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if n, ok := readOOMKill(p); n != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", name, n, ok, c.want, c.ok)
		}
	}
	if _, ok := readOOMKill(filepath.Join(dir, "missing")); ok {
		t.Error("a missing file gave a count")
	}
}
