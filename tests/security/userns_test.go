package security

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/tests/internal/harness"
	"github.com/sbxrun/sbx/userns"
)

// usernsLeasesOf lists the user namespace leases whose owner mentions dir.
func usernsLeasesOf(t *testing.T, dir string) []string {
	t.Helper()
	a, err := userns.Open("")
	if err != nil {
		t.Fatal(err)
	}
	leases, err := a.Leases()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for owner := range leases {
		if strings.Contains(owner, dir) {
			out = append(out, owner)
		}
	}
	return out
}

// hostIDOf returns the host id that the sandbox's root is, from its
// /proc/self/uid_map.
func hostIDOf(t *testing.T, uidMap string) uint64 {
	t.Helper()
	f := strings.Fields(uidMap)
	if len(f) < 3 || f[0] != "0" {
		t.Fatalf("uid_map %q", uidMap)
	}
	id, _ := strconv.ParseUint(f[1], 10, 32)
	return id
}

// TestUserNSOneShot: `sbx run --userns private`: root in the sandbox is an
// unprivileged host id of a range leased for the run and given back after
// it; every escape check is still refused, sbx's PID 1 still cannot be
// taken over, limits hold, and a per-user kernel limit (inotify instances)
// used up inside leaves the host's root its own.
func TestUserNSOneShot(t *testing.T) {
	root := harness.AdversaryRoot(t)
	out := harness.MustRun(t, "run", "--userns", "private", "--rootfs", root, "--", "sh", "-c", "cat /proc/self/uid_map; id -u; touch /made; stat -c %u /made")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || hostIDOf(t, lines[0]) < userns.DefaultBase || lines[1] != "0" || lines[2] != "0" {
		t.Fatalf("in the user namespace: %q", out)
	}
	// The command's pipes are its root's: it reopens them as a process
	// may (echo > /dev/stderr), to a file and to a pipe of the caller.
	r0 := harness.RunSbx(t, "in", "run", "-i", "--userns", "private", "--rootfs", root, "--", "sh", "-c", "echo out > /dev/stdout; echo err > /proc/self/fd/2; cat /dev/stdin")
	if r0.Code != 0 || r0.Stdout != "out\nin" || r0.Stderr != "err\n" {
		t.Errorf("reopening the command's own pipes: exit %d, stdout %q, stderr %q", r0.Code, r0.Stdout, r0.Stderr)
	}
	var script []string
	want := map[string][]string{}
	for _, c := range harness.EscapeChecks {
		script = append(script, "/adversary "+c.Args)
		name := c.Args
		if f := strings.Fields(c.Args); f[0] == "ptrace" || f[0] == "mknod" {
			name = f[0]
		}
		// Host-owned kernel knobs refuse the namespace's root before
		// they are found read-only.
		want[name] = []string{c.Want, "EACCES"}
	}
	script = append(script, "/adversary procmem 1", "/adversary procfd 1", "/adversary fds")
	want["procmem"], want["procfd"], want["fds"] = []string{"EACCES"}, []string{"EACCES"}, []string{""}
	r := harness.RunSbx(t, "", "run", "--userns", "private", "--rootfs", root, "--", "sh", "-c", strings.Join(script, "; "))
	got := harness.AdversaryResults(r.Stdout)
	for k, ok := range want {
		found := false
		for _, w := range ok {
			found = found || got[k] == w
		}
		if !found {
			t.Errorf("%s gave %q, want one of %q", k, got[k], ok)
		}
	}
	// Limits: an OOM kill is reported as such.
	rep := filepath.Join(t.TempDir(), "rep.json")
	r = harness.RunSbx(t, "", "run", "--userns", "private", "--memory", "24m", "--report", rep, "--rootfs", root, "--", "sh", "-c", "head -c 200m /dev/zero | tail > /dev/null")
	var report struct {
		Status    string `json:"status"`
		OOMKilled bool   `json:"oom_killed"`
	}
	data, _ := os.ReadFile(rep)
	if err := json.Unmarshal(data, &report); err != nil || report.Status != "oom" || !report.OOMKilled {
		t.Errorf("memory limit in a user namespace: exit %d, report %s", r.Code, data)
	}
	// A per-user kernel limit: the sandbox takes every inotify instance
	// its root may have; the host's root still gets one.
	max, _ := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	cmd := exec.Command(harness.SbxBin, "run", "-i", "--userns", "private", "--rootfs", root, "--", "/adversary", "inotify", strings.TrimSpace(string(max)))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	stdin.Close()
	_ = cmd.Wait()
	if strings.TrimSpace(line) != "inotify "+strings.TrimSpace(string(max)) || err != nil {
		t.Errorf("the sandbox took %q inotify instances; the host's root then got: %v", line, err)
	}
	if left := usernsLeasesOf(t, os.Getenv("SBX_RUN_ROOT")); len(left) > 0 {
		t.Errorf("leases left by runs: %v", left)
	}
	harness.AssertNoLeftovers(t)
}

// TestUserNSLongLived: a long-lived sandbox in a user namespace with a
// bridged network (its root binds port 80 and opens an ICMP socket, though
// it does not own the network namespace), a volume (host root's file there
// is not its root's; what it writes there belongs to its range), cp both
// ways, export and commit (with the ids it saw), stop and start; its
// range is given back when it is removed, and nothing leaks.
func TestUserNSLongLived(t *testing.T) {
	root := harness.AdversaryRoot(t)
	h := harness.NewHost(t)
	// The run root's parents must be traversable (sbx says so otherwise).
	if err := os.Chmod(filepath.Dir(h.Run), 0o711); err != nil {
		t.Fatal(err)
	}
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "host-file"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o1777); err != nil {
		t.Fatal(err)
	}
	store, err := imagecache.Open(filepath.Join(h.Root, "images"), imagecache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bench.ImportRoot(context.Background(), store, root, "userns/base:1"); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(h.Must(t, "create", "--userns", "private", "--network", "bridge", "--pull", "never", "-v", vol+":/vol", "userns/base:1"))
	h.Saw(id)
	out := h.Must(t, "exec", id, "--", "sh", "-c", "cat /proc/self/uid_map; stat -c %u /vol/host-file; echo made > /vol/made; ls /sys/class/net; ip -4 -o addr show eth0; "+
		"httpd -p 80 -h /tmp && echo bound-80; /adversary ping")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	hostID := hostIDOf(t, lines[0])
	if hostID < userns.DefaultBase || lines[1] != "65534" || !strings.Contains(out, "eth0") || !strings.Contains(out, "inet 10.") ||
		!strings.Contains(out, "bound-80") || !strings.Contains(out, "ping ok") {
		t.Errorf("sandbox in a user namespace: %q", out)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(vol, "made"), &st); err != nil || uint64(st.Uid) != hostID {
		t.Errorf("a file the sandbox's root wrote in the volume: uid %d (want its range's %d), %v", st.Uid, hostID, err)
	}
	// cp both ways, through the executor.
	src := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(src, []byte("in"), 0o644)
	h.Must(t, "cp", src, id+":/root/in.txt")
	if got := h.Must(t, "exec", id, "--", "sh", "-c", "cat /root/in.txt; stat -c %u /root/in.txt"); got != "in0\n" {
		t.Errorf("cp in: %q", got)
	}
	dst := filepath.Join(t.TempDir(), "out.txt")
	h.Must(t, "cp", id+":/root/in.txt", dst)
	if data, _ := os.ReadFile(dst); string(data) != "in" {
		t.Errorf("cp out: %q", data)
	}
	// Stop and start keep the namespace's files; commit stores them with
	// the sandbox's ids (root, not the host range).
	h.Must(t, "exec", id, "--", "sh", "-c", "echo kept > /root/kept")
	h.Must(t, "stop", id)
	h.Must(t, "start", id)
	if got := h.Must(t, "exec", id, "--", "cat", "/root/kept"); got != "kept\n" {
		t.Errorf("after stop and start: %q", got)
	}
	// Export writes the ids the sandbox sees too.
	exported := filepath.Join(t.TempDir(), "export.tar")
	h.Must(t, "export", "-o", exported, id)
	owners := tarOwners(t, exported)
	for _, name := range []string{"bin/busybox", "root/kept"} {
		if o, ok := owners[name]; !ok || o != "0:0" {
			t.Errorf("exported %s: owner %q (found %v), want 0:0", name, o, ok)
		}
	}
	h.Must(t, "commit", id, "userns/committed:1")
	other := strings.TrimSpace(h.Must(t, "create", "--userns", "host", "--pull", "never", "userns/committed:1"))
	h.Saw(other)
	if got := h.Must(t, "exec", other, "--", "stat", "-c", "%u:%g", "/root/kept"); got != "0:0\n" {
		t.Errorf("the committed file's owner in a sandbox without a user namespace: %q", got)
	}
	if len(usernsLeasesOf(t, h.Root)) != 1 {
		t.Errorf("leases of the sandbox: %v", usernsLeasesOf(t, h.Root))
	}
	h.Must(t, "rm", "-f", id, other)
	if left := usernsLeasesOf(t, h.Root); len(left) > 0 {
		t.Errorf("leases left after rm: %v", left)
	}
}

// tarOwners maps the names in the tar file at p to their uid:gid.
func tarOwners(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(hdr.Name, "./")] = strconv.Itoa(hdr.Uid) + ":" + strconv.Itoa(hdr.Gid)
	}
}
