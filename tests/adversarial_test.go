package tests

import (
	"strings"
	"testing"
)

// The adversarial suite: what a hostile tenant tries from inside a
// sandbox, and what a hostile executor sends to the host. docs/security.md
// lists every check and what it proves.

// confinement are the lines of /proc/self/status that say how a process
// is confined: seccomp mode, no_new_privs and capability sets.
var confinement = []string{"Seccomp:", "NoNewPrivs:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

// statusLines returns the confinement lines of a /proc/self/status dump.
func statusLines(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		for _, k := range confinement {
			if strings.HasPrefix(l, k) {
				got[k] = strings.TrimSpace(strings.TrimPrefix(l, k))
			}
		}
	}
	return got
}

// TestAdversarialAttachedProcessesAreConfined: processes started with
// `sbx exec -i`, `sbx exec -t` and `sbx shell` are confined exactly like
// those of plain `sbx exec`: seccomp filter on (mode 2), no_new_privs,
// the same capability sets. (They ran without seccomp when a host-side
// setns process started them.)
func TestAdversarialAttachedProcessesAreConfined(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t)
	want := statusLines(h.must(t, "exec", id, "--", "cat", "/proc/self/status"))
	if want["Seccomp:"] != "2" || want["NoNewPrivs:"] != "1" || len(want) != len(confinement) {
		t.Fatalf("plain exec is not confined: %v", want)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"exec -i", []string{"exec", "-i", id, "--", "cat", "/proc/self/status"}, ""},
		{"exec -t", []string{"exec", "-t", id, "--", "cat", "/proc/self/status"}, ""},
		{"exec -it", []string{"exec", "-it", id, "--", "cat", "/proc/self/status"}, ""},
		{"shell", []string{"shell", id}, "cat /proc/self/status; exit\n"},
	} {
		r := h.sbx(t, tc.stdin, tc.args...)
		if r.code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, r.code, r.stderr)
			continue
		}
		got := statusLines(r.stdout)
		for _, k := range confinement {
			if got[k] != want[k] {
				t.Errorf("%s: %s %q, plain exec has %q", tc.name, k, got[k], want[k])
			}
		}
	}
}
