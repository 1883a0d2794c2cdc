package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// TestClaimWithAFileAsWorkdirServesRequests: a claim whose working
// directory the member has as a file gives a sandbox whose executor
// serves requests: a command in another directory runs, one in the
// default directory fails naming it. (Its executor used to refuse every
// request once it read the claimant's defaults.)
func TestClaimWithAFileAsWorkdirServesRequests(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	newPool(t, h, "workdir", 1, busybox(t))
	o := busybox(t)
	o.Workdir = "/bin/sh"
	sb, err := h.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	if sb.FromPool != "workdir" {
		t.Fatalf("the create did not claim the pool's member: from pool %q", sb.FromPool)
	}
	res, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"echo", "ok"}, Cwd: "/"}, nil)
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("exec in /: %+v, %v", res, err)
	}
	if _, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"echo", "ok"}}, nil); err == nil || !strings.Contains(err.Error(), "/bin/sh") {
		t.Fatalf("exec in the default directory, a file: %v; want an error naming /bin/sh", err)
	}
}
