package cli

import (
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerSmallThings: the small things issue 16 saw, as they are now:
// exec -u of a user the sandbox lacks says so (exit 125, no "HTTP 200"),
// with -d as well; bench --help shows --rootfs as a directory flag, not
// "--rootfs true", and lists the pool and claim subjects.
func TestDockerSmallThings(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	for _, args := range [][]string{
		{"exec", "-u", "nosuchuser", id, "--", "id"},
		{"exec", "-d", "-u", "nosuchuser", id, "--", "id"},
	} {
		r := h.Sbx(t, "", args...)
		if r.Code != 125 || !strings.Contains(r.Stderr, `user "nosuchuser": no such user`) || strings.Contains(r.Stderr, "HTTP 200") {
			t.Errorf("sbx %s: %d %q", strings.Join(args, " "), r.Code, r.Stderr)
		}
	}
	help := h.Must(t, "bench", "--help")
	if strings.Contains(help, "--rootfs true") || !strings.Contains(help, "--rootfs string") {
		t.Errorf("bench --help shows --rootfs as:\n%s", help)
	}
	for _, subject := range []string{`"sbx personalised"`, `"sbx plain claim"`, `"sbx run, pooled"`, `"sbx cli"`} {
		if !strings.Contains(help, subject) {
			t.Errorf("bench --help does not list the subject %s:\n%s", subject, help)
		}
	}
}
