package lifecycle

import (
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRestartPolicy: --restart runs the main command again as docker's
// restart policies do, with no server and no sbx process left running:
// on-failure:N restarts a failing command N times and then it is exited,
// with the count in inspect; on-failure leaves a command that succeeded
// alone; always restarts after a back-off that grows (ps shows
// "Restarting (4) ... ago" between runs) until sbx stop ends it for good.
// Bad policies are refused before anything is made.
func TestRestartPolicy(t *testing.T) {
	h := harness.NewHost(t)

	// on-failure:2: three runs, then exited (3) with two restarts.
	id := h.Create(t, "--restart", "on-failure:2", "--", "sh", "-c", "echo run; exit 3")
	harness.WaitUntil(t, time.Minute, "the command exited for good", func() bool {
		return h.Inspect(t, id).State() == sbx.StatusExited
	})
	sb := h.Inspect(t, id)
	if sb.CmdExit == nil || sb.CmdExit.ExitCode != 3 || sb.RestartCount != 2 || sb.Options.Restart.String() != "on-failure:2" {
		t.Fatalf("after on-failure:2: cmd_exit %+v, restart_count %d, restart %+v", sb.CmdExit, sb.RestartCount, sb.Options.Restart)
	}
	if out := h.Must(t, "logs", id); strings.Count(out, "run\n") != 3 {
		t.Fatalf("logs of three runs: %q", out)
	}
	if out := h.Must(t, "ps", "-a", "--filter", "status=exited"); !strings.Contains(out, id[:12]) || !strings.Contains(out, "Exited (3) ") {
		t.Fatalf("ps -a --filter status=exited:\n%s", out)
	}

	// on-failure after a success: no restart.
	ok := h.Create(t, "--restart", "on-failure", "--", "true")
	harness.WaitUntil(t, time.Minute, "true exited", func() bool { return h.Inspect(t, ok).State() == sbx.StatusExited })
	if sb := h.Inspect(t, ok); sb.CmdExit.ExitCode != 0 || sb.RestartCount != 0 {
		t.Fatalf("on-failure after exit 0: %+v, %d restarts", sb.CmdExit, sb.RestartCount)
	}

	// always: restarted with a growing back-off, shown as restarting.
	always := h.Create(t, "--restart", "always", "--", "sh", "-c", "exit 4")
	harness.WaitUntil(t, time.Minute, "three restarts, and ps shows it restarting", func() bool {
		return h.Inspect(t, always).RestartCount >= 3 && strings.Contains(h.Must(t, "ps", "--filter", "status=restarting"), "Restarting (4) ")
	})
	sb = h.Inspect(t, always)
	if sb.RestartCount < 3 || sb.CmdExit != nil {
		t.Fatalf("always: restart_count %d, cmd_exit %+v", sb.RestartCount, sb.CmdExit)
	}
	h.Must(t, "stop", "-t", "1", always)
	if sb := h.Inspect(t, always); sb.State() != sbx.StatusExited {
		t.Fatalf("after stop: state %s", sb.State())
	}

	for _, bad := range [][]string{
		{"create", "--restart", "sometimes", "--rootfs", "/", "--", "true"},
		{"create", "--restart", "always:3", "--rootfs", "/", "--", "true"},
		{"create", "--restart", "always", "--rootfs", "/"},
		{"run", "-d", "--rm", "--restart", "always", "--rootfs", "/", "true"},
		{"run", "--restart", "always", "--rootfs", "/", "true"},
	} {
		if r := h.Sbx(t, "", bad...); r.Code == 0 || !strings.Contains(r.Stderr, "restart") {
			t.Errorf("%v: exit %d, %s", bad, r.Code, r.Stderr)
		}
	}
	for _, ref := range []string{id, ok, always} {
		h.Must(t, "rm", "-f", ref)
		h.AssertNoLeaksOf(t, ref)
	}
	if out := h.Must(t, "ps", "-aq"); out != "" {
		t.Fatalf("left after the bad creates: %s", out)
	}
}
