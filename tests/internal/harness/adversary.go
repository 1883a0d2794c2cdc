package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbxrun/sbx/tests/fixture"
)

// ConfinementLines are the lines of /proc/self/status that say how a process
// is confined: seccomp mode, no_new_privs and capability sets.
var ConfinementLines = []string{"Seccomp:", "NoNewPrivs:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

// StatusLines returns the confinement lines of a /proc/self/status dump.
func StatusLines(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		for _, k := range ConfinementLines {
			if strings.HasPrefix(l, k) {
				got[k] = strings.TrimSpace(strings.TrimPrefix(l, k))
			}
		}
	}
	return got
}

var (
	adversaryOnce sync.Once
	adversaryDir  string
	adversaryErr  error
)

// AdversaryRoot returns a busybox root with the adversary program (package
// tests/adversary) at /adversary, shared by the tests of the process.
func AdversaryRoot(t testing.TB) string {
	t.Helper()
	adversaryOnce.Do(func() {
		adversaryDir, adversaryErr = os.MkdirTemp("", "sbx-adversary-")
		if adversaryErr != nil {
			return
		}
		atExit = append(atExit, func() { os.RemoveAll(adversaryDir) })
		fixture.NewBusyboxRootfs(t, filepath.Join(adversaryDir, "root"))
		build := exec.Command("go", "build", "-o", filepath.Join(adversaryDir, "root", "adversary"), "github.com/sbxrun/sbx/tests/adversary")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			adversaryErr = fmt.Errorf("build the adversary: %v\n%s", err, out)
		}
	})
	if adversaryErr != nil {
		t.Fatal(adversaryErr)
	}
	return filepath.Join(adversaryDir, "root")
}

// AdversaryResults parses the adversary's "NAME RESULT" lines.
func AdversaryResults(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			got[l[:i]] = l[i+1:]
		}
	}
	return got
}

// ExpectAdversary fails unless every check in want has its result in out.
func ExpectAdversary(t *testing.T, what, out string, want map[string]string) {
	t.Helper()
	got := AdversaryResults(out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s gave %q, want %q (output %q)", what, k, got[k], v, out)
		}
	}
}

// BridgeLeftovers lists what bridged sandboxes leave in the state under
// root and runRoot and in the stand-in host namespace ns: leases (shared by
// the roots on the bridge), namespace mounts, veths beside the bridge, and
// sbx's per-sandbox nftables chains.
func BridgeLeftovers(t testing.TB, root, runRoot, ns string) []string {
	t.Helper()
	out := SharedLeases(t, ns)
	for _, d := range []string{filepath.Join(root, "network", "leases"), filepath.Join(runRoot, "netns")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	links, _ := exec.Command("ip", "-n", ns, "-o", "link", "show", "type", "veth").CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(links)), "\n") {
		if l != "" {
			out = append(out, "veth: "+l)
		}
	}
	rules, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "chains").CombinedOutput()
	for _, l := range strings.Split(string(rules), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "chain" && (strings.HasPrefix(f[1], "fw-") || strings.HasPrefix(f[1], "in-") || strings.HasPrefix(f[1], "pt-") || strings.HasPrefix(f[1], "sp-")) {
			out = append(out, "nft chain "+f[1])
		}
	}
	return out
}

// EscapeCheck is one adversary command (Args) and the result it must
// report (Want) inside a sandbox.
type EscapeCheck struct{ Args, Want string }

// EscapeChecks are what root in a default sandbox tries against the host,
// with the errno each must get: kernel knobs are read-only mounts or
// masked, the privileged syscalls are refused by seccomp and the missing
// capabilities, the device cgroup refuses block devices, no raw device is
// there, and sbx's own PID 1 cannot be traced.
var EscapeChecks = []EscapeCheck{
	{"write /proc/sys/kernel/hostname", "EROFS"},
	{"write /proc/sys/vm/drop_caches", "EROFS"},
	{"write /proc/sysrq-trigger", "ENOENT"},
	{"write /sys/kernel/mm/transparent_hugepage/enabled", "EROFS"},
	{"mount", "EPERM"},
	{"unshare user", "EPERM"},
	{"unshare mount", "EPERM"},
	{"unshare net", "EPERM"},
	{"unshare pid", "EPERM"},
	{"unshare cgroup", "EPERM"},
	{"keyctl", "EPERM"},
	{"open_by_handle_at", "EPERM"},
	{"bpf", "EPERM"},
	{"perf", "EPERM"},
	{"mknod /tmp/sda", "EPERM"},
	{"open /dev/mem", "ENOENT"},
	{"open /dev/kmsg", "ENOENT"},
	{"ptrace 1", "EPERM"},
}
