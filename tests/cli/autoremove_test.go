package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerRunDetachedRm: sbx run -d --rm (and create --rm) works as docker's: the sandbox
// is removed once its command ends, or once it is stopped (but not when it is
// restarted), by a background
// sbx process (there is no daemon) that then exits; a sandbox whose
// remover died is removed by sbx gc once its command ended.
func TestDockerRunDetachedRm(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")

	// The command ends by itself.
	id := strings.TrimSpace(h.Must(t, "run", "-d", "--rm", "busybox", "sh", "-c", "echo bye; sleep 0.2"))
	h.Saw(id)
	waitGone(h, t, id)
	h.AssertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// docker stop of a --rm container removes it too.
	id = strings.TrimSpace(h.Must(t, "run", "-d", "--rm", "--name", "rm-stop", "busybox", "sleep", "9121"))
	h.Saw(id)
	if sb := h.Inspect(t, "rm-stop"); !sb.Options.AutoRemove || sb.Status != "running" {
		t.Fatalf("run -d --rm: auto_remove %v, status %s", sb.Options.AutoRemove, sb.Status)
	}
	h.Must(t, "stop", "-t", "1", "rm-stop")
	waitGone(h, t, id)
	h.AssertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// docker restart keeps a --rm container: it runs on, and a stop
	// after it still removes it.
	id = strings.TrimSpace(h.Must(t, "run", "-d", "--rm", "--name", "rm-restart", "busybox", "sleep", "9123"))
	h.Saw(id)
	for range 3 {
		h.Must(t, "restart", "-t", "1", "rm-restart")
	}
	time.Sleep(2 * time.Second) // past restartGrace: a remover would have acted
	if sb := h.Inspect(t, "rm-restart"); sb.Status != "running" {
		t.Fatalf("after restart: %s", sb.Status)
	}
	h.Must(t, "stop", "-t", "1", "rm-restart")
	waitGone(h, t, id)
	h.AssertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// The remover died (a reboot, a kill): sbx gc removes the sandbox once
	// its command has ended, and leaves one whose command runs.
	id = strings.TrimSpace(h.Must(t, "run", "-d", "--rm", "busybox", "sleep", "9122"))
	h.Saw(id)
	pid := waitRemover(t, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNoRemover(t, id)
	if out := h.Must(t, "gc"); strings.Contains(out, id) {
		t.Fatalf("gc removed a --rm sandbox whose command runs: %q", out)
	}
	h.Must(t, "kill", id)
	harness.WaitUntil(t, 30*time.Second, "sbx gc removes the --rm sandbox whose command was killed", func() bool { return gcRemoved(h, t, id) })
	h.AssertNoLeaksOf(t, id)

	// create --rm IMAGE CMD (docker create --rm) too; without CMD there is
	// nothing to wait for.
	id = strings.TrimSpace(h.Must(t, "create", "--rm", "busybox", "sh", "-c", "sleep 0.2"))
	h.Saw(id)
	waitGone(h, t, id)
	waitNoRemover(t, id)
	if r := h.Sbx(t, "", "create", "--rm", "busybox"); r.Code == 0 || !strings.Contains(r.Stderr, "auto_remove needs a main command") {
		t.Fatalf("create --rm without CMD: %d %q", r.Code, r.Stderr)
	}

	// A --rm without a command to wait for is refused, and so is --rm with -i.
	if r := h.Sbx(t, "", "run", "-d", "--rm", "-i", "busybox", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "--interactive") {
		t.Fatalf("run -d --rm -i: %d %q", r.Code, r.Stderr)
	}
	if out := h.Must(t, "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Fatalf("sandboxes left: %q", out)
	}
}

// waitGone waits, bounded, until the sandbox is no longer listed.
func waitGone(h *harness.Host, t *testing.T, id string) {
	t.Helper()
	harness.WaitUntil(t, 30*time.Second, "sandbox "+id+" goes", func() bool { return !strings.Contains(h.Must(t, "ps", "-aq", "--no-trunc"), id) })
}

// gcRemoved runs sbx gc and reports whether it removed the --rm sandbox id.
func gcRemoved(h *harness.Host, t *testing.T, id string) bool {
	return strings.Contains(h.Must(t, "gc"), "removed (--rm, its command ended) "+id)
}

// removers are the pids of the sbx auto-remove processes of sandbox id.
func removers(id string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 2 && args[len(args)-2] == "auto-remove" && args[len(args)-1] == id {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func waitRemover(t *testing.T, id string) int {
	t.Helper()
	var pid int
	harness.WaitUntil(t, 10*time.Second, "one sbx auto-remove process for "+id, func() bool {
		p := removers(id)
		if len(p) == 1 {
			pid = p[0]
		}
		return len(p) == 1
	})
	return pid
}

func waitNoRemover(t *testing.T, id string) {
	t.Helper()
	harness.WaitUntil(t, 10*time.Second, "the sbx auto-remove process of "+id+" exits", func() bool { return len(removers(id)) == 0 })
}
