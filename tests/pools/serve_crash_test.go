package pools

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServeKilledMidRefill kills sbx serve (SIGKILL) while it refills a
// bridged warm pool: at each step of a member's create (SBX_TEST_CRASH_AT)
// and at random moments while a member is being created. After each kill
// sbx gc removes the member being created and keeps the pooled ones; the
// CLI then removes every sandbox of the root, pool members included (rm
// -f; sbx ps -a lists members only with --pooled), and gc runs again:
// nothing the test made may be left: no lease of its root in the bridge's
// shared directory, no veth on its bridge, no namespace mount, no cgroup,
// no port holder, no process.
func TestServeKilledMidRefill(t *testing.T) {
	h := harness.NewHost(t)
	rootfs := fixture.BusyboxRootfs(t)
	h.Must(t, "pool", "create", "refill", "--size", "3", "--network", "bridge", "--rootfs", rootfs)
	t.Cleanup(func() { h.Sbx(t, "", "pool", "rm", "refill") })
	token := filepath.Join(filepath.Dir(h.Root), "token")
	if err := os.WriteFile(token, []byte(harness.ServerTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(env ...string) *exec.Cmd {
		args := append([]string{"--log-level", "info", "serve", "--unix", filepath.Join(filepath.Dir(h.Root), "s.sock"),
			"--token-file", token, "--allow-host-dir", fixture.CacheDir, "--watch-interval", "200ms"}, harness.ExecutorBinaryFlag()...)
		cmd := h.Command(args...)
		cmd.Env = append(append(os.Environ(), h.Env...), env...)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// After a kill, gc alone removes the member being created (its lock
	// is free) and keeps the pooled ones; then the CLI removes every
	// sandbox, members included, gc runs again, and nothing is left.
	afterKill := func(t *testing.T, what string) {
		t.Helper()
		var cut []string
		ids := strings.Fields(h.Must(t, "ps", "-aq", "--pooled"))
		for _, id := range ids {
			h.Saw(id)
			if h.Inspect(t, id).Status == sbx.StatusCreating {
				cut = append(cut, id)
			}
		}
		t.Logf("%s: %d sandboxes, being created: %v", what, len(ids), cut)
		h.Must(t, "gc")
		for _, id := range cut {
			if r := h.Sbx(t, "", "inspect", id); r.Code == 0 {
				t.Errorf("gc kept %s, whose create the kill cut", id)
			}
			h.AssertNoLeaksOf(t, id)
		}
		left := strings.Fields(h.Must(t, "ps", "-aq", "--pooled"))
		for _, id := range left {
			if st := h.Inspect(t, id).Status; st != sbx.StatusPooled {
				t.Errorf("after gc, %s is %s, want pooled", id, st)
			}
		}
		if len(left) > 0 {
			h.Must(t, append([]string{"rm", "-f"}, left...)...)
		}
		h.Must(t, "gc")
		h.AssertNoLeaks(t)
		assertNoNetworkLeaks(t, h)
	}
	for _, step := range sandbox.CreateSteps {
		t.Run(step, func(t *testing.T) {
			cmd := serve("SBX_TEST_CRASH_AT=" + step)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("sbx serve was not killed at %s: %v\n%s", step, err, cmd.Stdout)
				}
			case <-time.After(90 * time.Second):
				t.Fatalf("sbx serve did not reach %s of a refill within 90s\n%s", step, cmd.Stdout)
			}
			afterKill(t, "killed at "+step)
		})
	}
	// Then at random moments of the refill's first, second or third
	// member.
	for i := range 6 {
		t.Run("random", func(t *testing.T) {
			cmd := serve()
			creating := false
			for deadline := time.Now().Add(60 * time.Second); !creating && time.Now().Before(deadline); {
				pooled, c := recordStates(h)
				creating = c && pooled >= i%3
				if !creating {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if !creating {
				t.Fatalf("sbx serve created no pool member within 60s\n%s", cmd.Stdout)
			}
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			afterKill(t, "killed while refilling")
		})
	}
}

// recordStates counts the records of h's root that say pooled and
// reports whether one says creating (read straight from disk: the CLI
// would wait for the creator's lock).
func recordStates(h *harness.Host) (pooled int, creating bool) {
	dirs, _ := os.ReadDir(filepath.Join(h.Root, "sandboxes"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(h.Root, "sandboxes", d.Name(), "record.json"))
		var sb sbx.Sandbox
		if err != nil || json.Unmarshal(data, &sb) != nil {
			continue
		}
		switch sb.Status {
		case sbx.StatusCreating:
			creating = true
		case sbx.StatusPooled:
			pooled++
		}
	}
	return pooled, creating
}

// assertNoNetworkLeaks fails if the bridged network of h's root left
// anything: a lease naming its root in the bridges' shared directory, a
// veth in its stand-in host namespace (which only this test uses), or a
// port holder of its root.
func assertNoNetworkLeaks(t testing.TB, h *harness.Host) {
	t.Helper()
	mine := filepath.Join(h.Root, "network")
	leases, _ := filepath.Glob(filepath.Join(netns.DefaultSharedDir, "*", "leases", "*.json"))
	for _, p := range leases {
		data, err := os.ReadFile(p)
		var l struct {
			Root, State, Owner string
		}
		if err == nil && json.Unmarshal(data, &l) == nil && l.Root == mine {
			t.Errorf("leaked lease %s: %s of %s", p, l.State, l.Owner)
		}
	}
	out, err := exec.Command("ip", "-n", h.Netns, "-o", "link", "show", "type", "veth").CombinedOutput()
	if err != nil {
		t.Errorf("list the veths of %s: %v\n%s", h.Netns, err, out)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("leaked veths in %s:\n%s", h.Netns, s)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if c := string(cmdline); strings.Contains(c, "sbx-hold") && strings.Contains(c, h.Root) {
			t.Errorf("leaked port holder %s: %q", p.Name(), strings.ReplaceAll(c, "\x00", " "))
		}
	}
}
