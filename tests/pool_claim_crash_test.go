package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestPoolClaimKilled kills a personalised claim (name, hostname, env, a
// volume, a tmpfs, an egress allow-list, a published port) at each of its
// steps: the member it was claiming is never handed out again (the next
// create claims the other member, or starts cold), sbx gc removes it with
// its rules, port holder and name, and nothing is left after.
func TestPoolClaimKilled(t *testing.T) {
	h := newLCHost(t)
	rootfs := fixture.BusyboxRootfs(t)
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.must(t, "pool", "create", "crashy", "--size", "2", "--network", "bridge", "--rootfs", rootfs)
	t.Cleanup(func() { h.sbx(t, "", "pool", "rm", "crashy") })
	claim := []string{"create", "--rootfs", rootfs, "--network", "bridge", "--name", "killed", "--hostname", "killed",
		"-e", "TASK=1", "-v", vol + ":/data:ro", "--tmpfs", "/scratch", "--egress", "192.0.2.0/24", "-p", "127.0.0.1:0:8080"}
	for _, step := range sandbox.ClaimSteps {
		t.Run(step, func(t *testing.T) {
			h.must(t, "pool", "fill", "crashy")
			members := strings.Fields(h.must(t, "ps", "-aq", "--pooled"))
			if len(members) != 2 {
				t.Fatalf("pool filled to %d members, want 2", len(members))
			}
			for _, id := range members {
				h.saw(id)
			}
			r := h.sbxEnv(t, []string{"SBX_TEST_CRASH_AT=" + step}, "", claim...)
			if r.code != -1 {
				t.Fatalf("sbx was not killed at %s: code %d\n%s", step, r.code, r.stderr)
			}
			var killed string
			for _, id := range members {
				if sb := h.inspect(t, id); sb.Status == sbx.StatusCreating {
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
			next := h.create(t, "--network", "bridge", "--name", "next")
			if next == killed {
				t.Fatalf("the member killed at %s was handed out again", step)
			}
			if sb := h.inspect(t, next); sb.FromPool != "crashy" || sb.Status != sbx.StatusRunning {
				t.Fatalf("the next create: status %s from pool %q, want the other member", sb.Status, sb.FromPool)
			}
			out := h.must(t, "gc")
			if !strings.Contains(out, killed) {
				t.Fatalf("gc did not remove the killed claim %s:\n%s", killed, out)
			}
			h.assertNoLeaksOf(t, killed)
			if r := h.sbx(t, "", "inspect", "killed"); r.code == 0 {
				t.Fatalf("after gc the name of the killed claim still resolves:\n%s", r.stdout)
			}
			h.must(t, "rm", "-f", next)
			h.must(t, "pool", "drain", "crashy")
			h.must(t, "gc")
			h.assertNoLeaks(t)
			holders := 0
			procs, _ := os.ReadDir("/proc")
			for _, p := range procs {
				cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
				if strings.Contains(string(cmdline), h.root) && strings.Contains(string(cmdline), "sbx-hold") {
					holders++
				}
			}
			if holders > 0 {
				t.Fatalf("%d port holders left after gc", holders)
			}
		})
	}
}
