package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerLogsTimes: logs -t puts each line's time first, --since and
// --until show what was written between, in docker's forms (RFC 3339,
// Unix seconds, a duration before now); a bad time is refused.
func TestDockerLogsTimes(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	id := create(t, h, "busybox", "sh", "-c", "echo one; sleep 1; echo two")
	if out := h.Must(t, "wait", id); out != "0\n" {
		t.Fatalf("wait: %q", out)
	}
	out := h.Must(t, "logs", "-t", id)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("logs -t: %q", out)
	}
	var times [2]time.Time
	for i, want := range []string{"one", "two"} {
		ts, text, _ := strings.Cut(lines[i], " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || text != want || time.Since(at) > time.Minute || time.Since(at) < 0 {
			t.Fatalf("logs -t line %d: %q (%v)", i, lines[i], err)
		}
		times[i] = at
	}
	if !times[1].After(times[0].Add(500 * time.Millisecond)) {
		t.Fatalf("the lines' times %v and %v are not a second apart", times[0], times[1])
	}
	if out := h.Must(t, "logs", "--since", times[1].Format(time.RFC3339Nano), id); out != "two\n" {
		t.Fatalf("logs --since the second line: %q", out)
	}
	if out := h.Must(t, "logs", "--until", times[0].Format(time.RFC3339Nano), id); out != "one\n" {
		t.Fatalf("logs --until the first line: %q", out)
	}
	if out := h.Must(t, "logs", "--since", "10m", id); out != "one\ntwo\n" {
		t.Fatalf("logs --since 10m: %q", out)
	}
	if out := h.Must(t, "logs", "--until", "1", id); out != "" {
		t.Fatalf("logs --until 1 (1970): %q", out)
	}
	if r := h.Sbx(t, "", "logs", "--since", "yesterday", id); r.Code != 125 || !strings.Contains(r.Stderr, "--since") {
		t.Fatalf("logs --since yesterday: %d %q", r.Code, r.Stderr)
	}
	h.Must(t, "rm", "-f", id)
	harness.AssertNoLeftovers(t)
}
