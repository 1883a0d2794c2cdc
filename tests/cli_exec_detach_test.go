package tests

import (
	"strings"
	"testing"
	"time"
)

// TestDockerExecDetach: sbx exec -d starts the command and returns at once
// printing nothing, as docker exec -d; the command runs on after the
// client went, --timeout still kills it, a command that cannot start says
// so with docker's exit codes, and -d refuses -i/-t.
func TestDockerExecDetach(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t)

	// The command waits for a file that only a later exec makes: exec -d
	// must have returned before it could end.
	out := h.must(t, "exec", "-d", "-e", "WHO=detached", "-w", "/tmp", id, "--", "sh", "-c",
		"while [ ! -e go ]; do sleep 0.05; done; echo $WHO in $(pwd) > done")
	if out != "" {
		t.Fatalf("exec -d printed %q, want nothing", out)
	}
	if ps := h.must(t, "exec", id, "--", "ps", "-o", "args"); !strings.Contains(ps, "while [ ! -e go ]") {
		t.Fatalf("the detached command does not run:\n%s", ps)
	}
	h.must(t, "exec", id, "--", "touch", "/tmp/go")
	waitUntil(t, 30*time.Second, "the detached command finishes", func() bool {
		return h.sbx(t, "", "exec", id, "--", "cat", "/tmp/done").stdout == "detached in /tmp\n"
	})

	// --timeout kills it (and its process group).
	h.must(t, "exec", "-d", "--timeout", "300ms", id, "--", "sh", "-c", "sleep 9141 & sleep 9142")
	waitUntil(t, 30*time.Second, "--timeout ends the detached command", func() bool {
		return !strings.Contains(h.must(t, "exec", id, "--", "ps", "-o", "args"), "sleep 914")
	})

	// -u: it runs as that user.
	h.must(t, "exec", "-d", "-u", "1234:1234", id, "--", "sh", "-c", "id -u > /tmp/uid")
	waitUntil(t, 30*time.Second, "the detached command as uid 1234", func() bool {
		return h.sbx(t, "", "exec", id, "--", "cat", "/tmp/uid").stdout == "1234\n"
	})

	if r := h.sbx(t, "", "exec", "-d", id, "--", "no-such-command"); r.code != 127 || !strings.Contains(r.stderr, "no-such-command") {
		t.Fatalf("exec -d of a missing command: %d %q", r.code, r.stderr)
	}
	if r := h.sbx(t, "", "exec", "-d", "-i", id, "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "-i or -t") {
		t.Fatalf("exec -d -i: %d %q", r.code, r.stderr)
	}
	if r := h.sbx(t, "", "exec", "-d", "nosuchsandbox", "--", "true"); r.code == 0 {
		t.Fatalf("exec -d in a missing sandbox succeeded")
	}
}
