package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDockerRunDetachedRm: sbx run -d --rm (and create --rm) works as docker's: the sandbox
// is removed once its command ends, or once it is stopped (but not when it is
// restarted), by a background
// sbx process (there is no daemon) that then exits; a sandbox whose
// remover died is removed by sbx gc once its command ended.
func TestDockerRunDetachedRm(t *testing.T) {
	h := newLCHost(t)
	h.env = []string{"SBX_PULL=never"}
	h.importBusybox(t, "busybox")

	// The command ends by itself.
	id := strings.TrimSpace(h.must(t, "run", "-d", "--rm", "busybox", "sh", "-c", "echo bye; sleep 0.2"))
	h.saw(id)
	h.waitGone(t, id)
	h.assertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// docker stop of a --rm container removes it too.
	id = strings.TrimSpace(h.must(t, "run", "-d", "--rm", "--name", "rm-stop", "busybox", "sleep", "9121"))
	h.saw(id)
	if sb := h.inspect(t, "rm-stop"); !sb.Options.AutoRemove || sb.Status != "running" {
		t.Fatalf("run -d --rm: auto_remove %v, status %s", sb.Options.AutoRemove, sb.Status)
	}
	h.must(t, "stop", "-t", "1", "rm-stop")
	h.waitGone(t, id)
	h.assertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// docker restart keeps a --rm container: it runs on, and a stop
	// after it still removes it.
	id = strings.TrimSpace(h.must(t, "run", "-d", "--rm", "--name", "rm-restart", "busybox", "sleep", "9123"))
	h.saw(id)
	for range 3 {
		h.must(t, "restart", "-t", "1", "rm-restart")
	}
	time.Sleep(2 * time.Second) // past restartGrace: a remover would have acted
	if sb := h.inspect(t, "rm-restart"); sb.Status != "running" {
		t.Fatalf("after restart: %s", sb.Status)
	}
	h.must(t, "stop", "-t", "1", "rm-restart")
	h.waitGone(t, id)
	h.assertNoLeaksOf(t, id)
	waitNoRemover(t, id)

	// The remover died (a reboot, a kill): sbx gc removes the sandbox once
	// its command has ended, and leaves one whose command runs.
	id = strings.TrimSpace(h.must(t, "run", "-d", "--rm", "busybox", "sleep", "9122"))
	h.saw(id)
	pid := waitRemover(t, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNoRemover(t, id)
	if out := h.must(t, "gc"); strings.Contains(out, id) {
		t.Fatalf("gc removed a --rm sandbox whose command runs: %q", out)
	}
	h.must(t, "kill", id)
	waitUntil(t, 30*time.Second, "sbx gc removes the --rm sandbox whose command was killed", func() bool { return h.gcRemoved(t, id) })
	h.assertNoLeaksOf(t, id)

	// create --rm IMAGE CMD (docker create --rm) too; without CMD there is
	// nothing to wait for.
	id = strings.TrimSpace(h.must(t, "create", "--rm", "busybox", "sh", "-c", "sleep 0.2"))
	h.saw(id)
	h.waitGone(t, id)
	waitNoRemover(t, id)
	if r := h.sbx(t, "", "create", "--rm", "busybox"); r.code == 0 || !strings.Contains(r.stderr, "auto_remove needs a main command") {
		t.Fatalf("create --rm without CMD: %d %q", r.code, r.stderr)
	}

	// A --rm without a command to wait for is refused, and so is --rm with -i.
	if r := h.sbx(t, "", "run", "-d", "--rm", "-i", "busybox", "true"); r.code != 125 || !strings.Contains(r.stderr, "--interactive") {
		t.Fatalf("run -d --rm -i: %d %q", r.code, r.stderr)
	}
	if out := h.must(t, "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Fatalf("sandboxes left: %q", out)
	}
}

// waitGone waits, bounded, until the sandbox is no longer listed.
func (h *lcHost) waitGone(t *testing.T, id string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "sandbox "+id+" goes", func() bool { return !strings.Contains(h.must(t, "ps", "-aq", "--no-trunc"), id) })
}

// gcRemoved runs sbx gc and reports whether it removed the --rm sandbox id.
func (h *lcHost) gcRemoved(t *testing.T, id string) bool {
	return strings.Contains(h.must(t, "gc"), "removed (--rm, its command ended) "+id)
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
	waitUntil(t, 10*time.Second, "one sbx auto-remove process for "+id, func() bool {
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
	waitUntil(t, 10*time.Second, "the sbx auto-remove process of "+id+" exits", func() bool { return len(removers(id)) == 0 })
}
