package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/tests/fixture"
)

// Host is a private sbx state (--root, --run-root) for one lifecycle
// test, so that its leak checks see only its own sandboxes.
type Host struct {
	Root, Run string
	Netns     string // network namespace standing in for the host
	Env       []string

	mu  sync.Mutex
	ids map[string]bool // every sandbox id the test saw
}

// NewHost makes a private state for the test, with its stand-in host
// network namespace; at the test's end it removes every sandbox left, runs
// sbx gc and fails on anything leaked.
func NewHost(t *testing.T) *Host {
	t.Helper()
	dir, err := os.MkdirTemp("", "sbxlc") // short: socket paths must fit 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	h := &Host{Root: filepath.Join(dir, "root"), Run: filepath.Join(dir, "run"), ids: map[string]bool{}}
	// Bridged sandboxes get their bridge, veths and rules in a namespace
	// that stands in for the host, never on the machine's own interfaces.
	h.Netns = HostNS(t)
	t.Cleanup(func() {
		// Remove whatever the test left, then insist nothing leaked.
		r := h.Sbx(t, "", "ps", "-aq")
		if ids := strings.Fields(r.Stdout); len(ids) > 0 {
			h.Sbx(t, "", append([]string{"rm", "-f"}, ids...)...)
		}
		h.Sbx(t, "", "gc")
		h.AssertNoLeaks(t)
		_ = os.RemoveAll(dir)
	})
	return h
}

// Sbx runs the sbx binary against this host's state.
func (h *Host) Sbx(t testing.TB, stdin string, args ...string) Result {
	t.Helper()
	return h.SbxEnv(t, nil, stdin, args...)
}

// SbxEnv is Sbx with env added to the environment.
func (h *Host) SbxEnv(t testing.TB, env []string, stdin string, args ...string) Result {
	t.Helper()
	cmd := h.Command(args...)
	cmd.Env = append(append(os.Environ(), h.Env...), env...)
	return RunCmd(t, cmd, stdin)
}

// Command is sbx with this host's state, inside its stand-in host namespace.
func (h *Host) Command(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.Netns, SbxBin, "--root", h.Root, "--run-root", h.Run}, args...)...)
}

// Must runs sbx and fails the test unless it exits 0.
func (h *Host) Must(t testing.TB, args ...string) string {
	t.Helper()
	r := h.Sbx(t, "", args...)
	if r.Code != 0 {
		t.Fatalf("sbx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Create creates a busybox sandbox and returns its id.
func (h *Host) Create(t testing.TB, args ...string) string {
	t.Helper()
	args = append([]string{"create", "--rootfs", fixture.BusyboxRootfs(t)}, args...)
	id := strings.TrimSpace(h.Must(t, args...))
	if len(id) != 32 {
		t.Fatalf("sbx create printed %q, want a 32-digit id", id)
	}
	h.Saw(id)
	return id
}

// Saw records a sandbox id for the leak check at the test's end.
func (h *Host) Saw(id string) {
	h.mu.Lock()
	h.ids[id] = true
	h.mu.Unlock()
}

// Inspect returns the record of one sandbox.
func (h *Host) Inspect(t testing.TB, ref string) sbx.Sandbox {
	t.Helper()
	var out []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.Must(t, "inspect", ref)), &out); err != nil || len(out) != 1 {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return out[0]
}

// AssertNoLeaksOf fails if a removed sandbox left mounts, cgroups, its
// runtime directory or its egress state.
func (h *Host) AssertNoLeaksOf(t testing.TB, id string) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), id) {
		t.Errorf("leaked mounts of %s", id)
	}
	if _, err := os.Stat(filepath.Join(h.Run, "sandboxes", id)); !os.IsNotExist(err) {
		t.Errorf("leaked runtime directory of %s", id)
	}
	if _, err := os.Lstat(filepath.Join(h.Run, "mntns", id)); !os.IsNotExist(err) {
		t.Errorf("leaked mount namespace pin of %s", id)
	}
	if _, err := os.Lstat(filepath.Join(h.Root, "network", "egress", id)); !os.IsNotExist(err) {
		t.Errorf("leaked egress state of %s", id)
	}
	if paths := cgroup.Leftovers()[id]; len(paths) > 0 {
		t.Errorf("leaked cgroups of %s: %v", id, paths)
	}
}

// AssertNoLeaks fails if anything of this host's sandboxes is left: mounts,
// cgroups, runtime and state directories, names, leases, veths, nftables
// chains, processes.
func (h *Host) AssertNoLeaks(t testing.TB) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, h.Run) || strings.Contains(line, h.Root) {
			t.Errorf("leaked mount: %s", line)
		}
	}
	for _, d := range []string{filepath.Join(h.Run, "sandboxes"), filepath.Join(h.Root, "sandboxes"), filepath.Join(h.Root, "names"), filepath.Join(h.Root, "expiry"), filepath.Join(h.Root, "network", "egress"), filepath.Join(h.Run, "mntns")} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			t.Errorf("leaked entries in %s: %d", d, len(entries))
		}
	}
	// The stand-in host namespace is this host's alone: any lease, veth or
	// per-sandbox chain left in it is a leak. An egress daemon started on
	// demand lingers a few idle checks (15 s) before it exits and removes
	// the bridge's state directory, so the check waits for it.
	left := BridgeLeftovers(t, h.Root, h.Run, h.Netns)
	for deadline := time.Now().Add(30 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		left = BridgeLeftovers(t, h.Root, h.Run, h.Netns)
	}
	for _, l := range left {
		t.Errorf("leaked network state: %s", l)
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
		if err == nil && strings.HasPrefix(root, h.Run) {
			t.Errorf("leaked process %s rooted in %s", p.Name(), root)
		}
	}
}

// ImportBusybox imports the busybox fixture as image name into the host's
// image cache and returns name.
func (h *Host) ImportBusybox(t *testing.T, name string) string {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "busybox.tar")
	if out, err := exec.Command("tar", "-C", fixture.BusyboxRootfs(t), "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	h.Must(t, "import", "-q", tarball, name)
	return name
}

// ReachableTempDir is a t.TempDir that other users may traverse (not
// read), as the run root of sandboxes in private user namespaces needs.
func ReachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
