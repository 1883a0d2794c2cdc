package pools

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestPoolClaimKilled kills a personalised claim (name, hostname, env, a
// volume, a tmpfs, an egress allow-list with a name, a secret bound to
// it, a published port) at each of its steps: the member it was claiming
// is never handed out again (the next create claims the other member, or
// starts cold), sbx gc removes it with its rules, port holder, name and
// egress state, and nothing is left after.
func TestPoolClaimKilled(t *testing.T) {
	h := harness.NewHost(t)
	rootfs := fixture.BusyboxRootfs(t)
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "pool", "create", "crashy", "--size", "2", "--network", "bridge", "--rootfs", rootfs)
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "crashy") })
	claim := []string{"create", "--rootfs", rootfs, "--network", "bridge", "--name", "killed", "--hostname", "killed",
		"-e", "TASK=1", "-v", vol + ":/data:ro", "--tmpfs", "/scratch", "--egress", "192.0.2.0/24,api.test", "--secret", "TOKEN@api.test", "-p", "127.0.0.1:0:8080"}
	for _, step := range sandbox.ClaimSteps {
		t.Run(step, func(t *testing.T) {
			h.Must(t, "pool", "fill", "crashy")
			members := idle(h, t)
			if len(members) != 2 {
				t.Fatalf("pool filled to %d members, want 2", len(members))
			}
			for _, id := range members {
				h.Saw(id)
			}
			r := h.SbxEnv(t, []string{"SBX_TEST_CRASH_AT=" + step, "TOKEN=v"}, "", claim...)
			if r.Code != -1 {
				t.Fatalf("sbx was not killed at %s: code %d\n%s", step, r.Code, r.Stderr)
			}
			var killed string
			for _, id := range members {
				if sb := h.Inspect(t, id); sb.Status == sbx.StatusCreating {
					if killed != "" || sb.FromPool != "crashy" {
						t.Fatalf("after the kill: %s is %s from pool %q (already found %s)", id, sb.Status, sb.FromPool, killed)
					}
					killed = id
				}
			}
			if killed == "" {
				t.Fatalf("after the kill at %s: no member is being claimed", step)
			}
			// The next create gets the other member, never the half-claimed one.
			next := h.Create(t, "--network", "bridge", "--name", "next")
			if next == killed {
				t.Fatalf("the member killed at %s was handed out again", step)
			}
			if sb := h.Inspect(t, next); sb.FromPool != "crashy" || sb.Status != sbx.StatusRunning {
				t.Fatalf("the next create: status %s from pool %q, want the other member", sb.Status, sb.FromPool)
			}
			out := h.Must(t, "gc")
			if !strings.Contains(out, killed) {
				t.Fatalf("gc did not remove the killed claim %s:\n%s", killed, out)
			}
			h.AssertNoLeaksOf(t, killed)
			if r := h.Sbx(t, "", "inspect", "killed"); r.Code == 0 {
				t.Fatalf("after gc the name of the killed claim still resolves:\n%s", r.Stdout)
			}
			h.Must(t, "rm", "-f", next)
			h.Must(t, "pool", "drain", "crashy")
			h.Must(t, "gc")
			h.AssertNoLeaks(t)
			holders := 0
			procs, _ := os.ReadDir("/proc")
			for _, p := range procs {
				cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
				if strings.Contains(string(cmdline), h.Root) && strings.Contains(string(cmdline), "sbx-hold") {
					holders++
				}
			}
			if holders > 0 {
				t.Fatalf("%d port holders left after gc", holders)
			}
		})
	}
}

// TestPoolClaimPortTaken: a claim whose published port another sandbox
// publishes fails with the port error and puts the member back in its
// pool untouched, as does one whose name is taken: the next claim gets
// it.
func TestPoolClaimPortTaken(t *testing.T) {
	h := harness.NewHost(t)
	rootfs := fixture.BusyboxRootfs(t)
	h.Must(t, "pool", "create", "ports", "--size", "2", "--network", "bridge", "--rootfs", rootfs)
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "ports") })
	h.Must(t, "pool", "fill", "ports")
	first := h.Create(t, "--network", "bridge", "--name", "first", "-p", "127.0.0.1:18089:80")
	if sb := h.Inspect(t, first); sb.FromPool != "ports" {
		t.Fatalf("the first create did not claim: %+v", sb.CreateTimings)
	}
	// The CLI refills the pool after a claim: list the idle members now.
	left := idle(h, t)
	if len(left) == 0 {
		t.Fatal("no idle member left after one claim")
	}
	for _, id := range left {
		h.Saw(id)
	}
	// A claim refused for its port, or for its name after its ports were
	// chosen, leaves the members as they were.
	for _, refused := range []struct{ name, port, says string }{
		{"second", "18089", "18089"}, {"first", "18091", "first"},
	} {
		r := h.Sbx(t, "", "create", "--rootfs", rootfs, "--network", "bridge", "--name", refused.name, "-p", "127.0.0.1:"+refused.port+":80")
		if r.Code == 0 || !strings.Contains(r.Stderr, refused.says) {
			t.Fatalf("a create that must be refused (%s): exit %d\n%s%s", refused.says, r.Code, r.Stdout, r.Stderr)
		}
		if now := idle(h, t); strings.Join(now, " ") != strings.Join(left, " ") {
			t.Fatalf("after the refused claim (%s) the idle members are %v, want %v", refused.says, now, left)
		}
		for _, id := range left {
			if sb := h.Inspect(t, id); sb.Status != sbx.StatusPooled || sb.Name != "" || sb.Network == nil || len(sb.Network.Ports) != 0 {
				t.Fatalf("member %s after the refused claim (%s): %s %q %+v", id, refused.says, sb.Status, sb.Name, sb.Network)
			}
		}
	}
	if r := h.Sbx(t, "", "inspect", "second"); r.Code == 0 {
		t.Fatal("the refused claim's name resolves")
	}
	second := h.Create(t, "--network", "bridge", "-p", "127.0.0.1:18090:80")
	if sb := h.Inspect(t, second); sb.FromPool != "ports" || !slices.Contains(left, second) {
		t.Fatalf("the next claim got %s (from pool %q), want one of the members put back %v", second, sb.FromPool, left)
	}
	h.Must(t, "rm", "-f", first, second)
	h.Must(t, "pool", "drain", "ports")
}

// idle lists the idle pool members of h.
func idle(h *harness.Host, t *testing.T) []string {
	t.Helper()
	var out []string
	for _, id := range strings.Fields(h.Must(t, "ps", "-aq", "--pooled")) {
		if h.Inspect(t, id).Status == sbx.StatusPooled {
			out = append(out, id)
		}
	}
	return out
}
