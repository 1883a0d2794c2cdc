package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/tests/fixture"
)

// lcHost is a private sbx state (--root, --run-root) for one lifecycle
// test, so that its leak checks see only its own sandboxes.
type lcHost struct {
	root, run string
	netns     string // network namespace standing in for the host
	env       []string

	mu  sync.Mutex
	ids map[string]bool // every sandbox id the test saw
}

func newLCHost(t *testing.T) *lcHost {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxlc") // short: socket paths must fit 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	h := &lcHost{root: filepath.Join(dir, "root"), run: filepath.Join(dir, "run"), ids: map[string]bool{}}
	// Bridged sandboxes get their bridge, veths and rules in a namespace
	// that stands in for the host, never on the machine's own interfaces.
	h.netns = testHostNS(t)
	t.Cleanup(func() {
		// Remove whatever the test left, then insist nothing leaked.
		r := h.sbx(t, "", "ps", "-aq")
		if ids := strings.Fields(r.stdout); len(ids) > 0 {
			h.sbx(t, "", append([]string{"rm", "-f"}, ids...)...)
		}
		h.sbx(t, "", "gc")
		h.assertNoLeaks(t)
		_ = os.RemoveAll(dir)
	})
	return h
}

// sbx runs the sbx binary against this host's state.
func (h *lcHost) sbx(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	return h.sbxEnv(t, nil, stdin, args...)
}

func (h *lcHost) sbxEnv(t testing.TB, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := h.command(args...)
	cmd.Env = append(append(os.Environ(), h.env...), env...)
	return runCmd(t, cmd, stdin)
}

// command is sbx with this host's state, inside its stand-in host namespace.
func (h *lcHost) command(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.netns, sbxBin, "--root", h.root, "--run-root", h.run}, args...)...)
}

// must runs sbx and fails the test unless it exits 0.
func (h *lcHost) must(t testing.TB, args ...string) string {
	t.Helper()
	r := h.sbx(t, "", args...)
	if r.code != 0 {
		t.Fatalf("sbx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// create creates a busybox sandbox and returns its id.
func (h *lcHost) create(t testing.TB, args ...string) string {
	t.Helper()
	args = append([]string{"create", "--rootfs", fixture.BusyboxRootfs(t)}, args...)
	id := strings.TrimSpace(h.must(t, args...))
	if len(id) != 32 {
		t.Fatalf("sbx create printed %q, want a 32-digit id", id)
	}
	h.saw(id)
	return id
}

func (h *lcHost) saw(id string) {
	h.mu.Lock()
	h.ids[id] = true
	h.mu.Unlock()
}

// inspect returns the record of one sandbox.
func (h *lcHost) inspect(t testing.TB, ref string) sbx.Sandbox {
	t.Helper()
	var out []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.must(t, "inspect", ref)), &out); err != nil || len(out) != 1 {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return out[0]
}

// assertNoLeaksOf fails if a removed sandbox left mounts, cgroups or its
// runtime directory.
func (h *lcHost) assertNoLeaksOf(t testing.TB, id string) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), id) {
		t.Errorf("leaked mounts of %s", id)
	}
	if _, err := os.Stat(filepath.Join(h.run, "sandboxes", id)); !os.IsNotExist(err) {
		t.Errorf("leaked runtime directory of %s", id)
	}
	if _, err := os.Lstat(filepath.Join(h.run, "mntns", id)); !os.IsNotExist(err) {
		t.Errorf("leaked mount namespace pin of %s", id)
	}
	if paths := cgroup.Leftovers()[id]; len(paths) > 0 {
		t.Errorf("leaked cgroups of %s: %v", id, paths)
	}
}

// assertNoLeaks fails if anything of this host's sandboxes is left: mounts,
// cgroups, runtime and state directories, names, processes.
func (h *lcHost) assertNoLeaks(t testing.TB) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, h.run) || strings.Contains(line, h.root) {
			t.Errorf("leaked mount: %s", line)
		}
	}
	for _, d := range []string{filepath.Join(h.run, "sandboxes"), filepath.Join(h.root, "sandboxes"), filepath.Join(h.root, "names"), filepath.Join(h.root, "expiry"), filepath.Join(h.root, "network", "leases"), filepath.Join(h.run, "netns"), filepath.Join(h.run, "mntns")} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			t.Errorf("leaked entries in %s: %d", d, len(entries))
		}
	}
	h.mu.Lock()
	ids := h.ids
	h.mu.Unlock()
	for id, paths := range cgroup.Leftovers() {
		if ids[id] {
			t.Errorf("leaked cgroups of %s: %v", id, paths)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		root, err := os.Readlink("/proc/" + p.Name() + "/root")
		if err == nil && strings.HasPrefix(root, h.run) {
			t.Errorf("leaked process %s rooted in %s", p.Name(), root)
		}
	}
}

// reachableTempDir is a t.TempDir that other users may traverse (not
// read), as the run root of sandboxes in private user namespaces needs.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
