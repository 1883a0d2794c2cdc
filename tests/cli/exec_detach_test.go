package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerExecDetach: sbx exec -d starts the command and returns at once
// printing nothing, as docker exec -d; the command runs on after the
// client went, --timeout still kills it, a command that cannot start says
// so with docker's exit codes, and -d refuses -i/-t.
func TestDockerExecDetach(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)

	// The command waits for a file that only a later exec makes: exec -d
	// must have returned before it could end.
	out := h.Must(t, "exec", "-d", "-e", "WHO=detached", "-w", "/tmp", id, "--", "sh", "-c",
		"while [ ! -e go ]; do sleep 0.05; done; echo $WHO in $(pwd) > done")
	if out != "" {
		t.Fatalf("exec -d printed %q, want nothing", out)
	}
	if ps := h.Must(t, "exec", id, "--", "ps", "-o", "args"); !strings.Contains(ps, "while [ ! -e go ]") {
		t.Fatalf("the detached command does not run:\n%s", ps)
	}
	h.Must(t, "exec", id, "--", "touch", "/tmp/go")
	harness.WaitUntil(t, 30*time.Second, "the detached command finishes", func() bool {
		return h.Sbx(t, "", "exec", id, "--", "cat", "/tmp/done").Stdout == "detached in /tmp\n"
	})

	// --timeout kills it (and its process group).
	h.Must(t, "exec", "-d", "--timeout", "300ms", id, "--", "sh", "-c", "sleep 9141 & sleep 9142")
	harness.WaitUntil(t, 30*time.Second, "--timeout ends the detached command", func() bool {
		return !strings.Contains(h.Must(t, "exec", id, "--", "ps", "-o", "args"), "sleep 914")
	})

	// -u: it runs as that user.
	h.Must(t, "exec", "-d", "-u", "1234:1234", id, "--", "sh", "-c", "id -u > /tmp/uid")
	harness.WaitUntil(t, 30*time.Second, "the detached command as uid 1234", func() bool {
		return h.Sbx(t, "", "exec", id, "--", "cat", "/tmp/uid").Stdout == "1234\n"
	})

	if r := h.Sbx(t, "", "exec", "-d", id, "--", "no-such-command"); r.Code != 127 || !strings.Contains(r.Stderr, "no-such-command") {
		t.Fatalf("exec -d of a missing command: %d %q", r.Code, r.Stderr)
	}
	if r := h.Sbx(t, "", "exec", "-d", "-i", id, "--", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "-i or -t") {
		t.Fatalf("exec -d -i: %d %q", r.Code, r.Stderr)
	}
	if r := h.Sbx(t, "", "exec", "-d", "nosuchsandbox", "--", "true"); r.Code == 0 {
		t.Fatalf("exec -d in a missing sandbox succeeded")
	}
}
