package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// The whole lifecycle of one sandbox through the CLI.
func TestLifecycleCLI(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--name", "web", "--label", "team=a", "--label", "tier=1",
		"-e", "GREETING=hello", "-w", "/work", "--memory", "64m", "--pids-limit", "64")

	// Listing: table, quiet, json, label filters.
	if out := h.Must(t, "ps"); !strings.Contains(out, id[:12]) || !strings.Contains(out, "web") || !strings.Contains(out, "Up ") {
		t.Fatalf("sbx ps:\n%s", out)
	}
	if out := strings.TrimSpace(h.Must(t, "ls", "-q", "--filter", "label=team=a")); out != id {
		t.Fatalf("ls -q --filter label=team=a = %q, want %s", out, id)
	}
	if out := strings.TrimSpace(h.Must(t, "ls", "-q", "--filter", "label=team=b")); out != "" {
		t.Fatalf("ls --filter label=team=b listed %q", out)
	}
	var list []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.Must(t, "ps", "--format", "json")), &list); err != nil || len(list) != 1 {
		t.Fatalf("ps --format json: %v (%d entries)", err, len(list))
	}

	// Inspect: spec, state, times, PID, socket.
	sb := h.Inspect(t, "web")
	if sb.ID != id || sb.Status != sbx.StatusRunning || sb.Pid <= 0 || sb.Created.IsZero() || sb.Started == nil {
		t.Fatalf("inspect: %+v", sb)
	}
	if fi, err := os.Stat(sb.Socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("executor socket %s: %v", sb.Socket, err)
	}
	if sb.Options.Limits.MemoryBytes != 64<<20 || sb.Options.Labels["tier"] != "1" {
		t.Fatalf("inspect spec: %+v", sb.Options)
	}
	var infos []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.Must(t, "inspect", id)), &infos); err != nil || len(infos) != 1 || !slices.Contains(infos[0].Pids, sb.Pid) {
		t.Fatalf("inspect pids: %v %+v", err, infos)
	}

	// Exec: output streamed, exit code propagated, defaults and overrides.
	r := h.Sbx(t, "", "exec", "web", "--", "sh", "-c", `echo "$GREETING from $(pwd)"; echo oops >&2; exit 7`)
	if r.Code != 7 || r.Stdout != "hello from /work\n" || r.Stderr != "oops\n" {
		t.Fatalf("exec: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	r = h.Sbx(t, "", "exec", "-e", "GREETING=bye", "-w", "/tmp", "-u", "1000:1000", id[:8], "--", "sh", "-c", `echo "$GREETING $(pwd) $(id -u):$(id -g)"`)
	if r.Code != 0 || r.Stdout != "bye /tmp 1000:1000\n" {
		t.Fatalf("exec with overrides: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := h.Sbx(t, "", "exec", "--timeout", "300ms", "web", "--", "sleep", "10"); r.Code != 124 {
		t.Fatalf("exec --timeout: code %d, want 124", r.Code)
	}
	if r := h.Sbx(t, "", "exec", "web", "--", "/no/such/cmd"); r.Code != 127 && r.Code != 126 {
		t.Fatalf("exec of a missing command: code %d, want 127", r.Code)
	}
	// Interactive: stdin streamed in, and a shell session.
	if r := h.Sbx(t, "world\n", "exec", "-i", "web", "--", "sh", "-c", "read a; echo got:$a"); r.Code != 0 || r.Stdout != "got:world\n" {
		t.Fatalf("exec -i: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := h.Sbx(t, "echo in-shell $GREETING; exit 4\n", "shell", "web"); r.Code != 4 || !strings.Contains(r.Stdout, "in-shell hello") {
		t.Fatalf("shell: code %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}

	// cp both ways, files and directories.
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "tree/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "tree/sub/f"), []byte("payload"), 0o640); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "cp", filepath.Join(src, "tree"), "web:/work/")
	if out := h.Must(t, "exec", "web", "--", "cat", "/work/tree/sub/f"); out != "payload" {
		t.Fatalf("file copied in reads %q", out)
	}
	h.Must(t, "exec", "web", "--", "sh", "-c", "echo made-inside > /work/tree/new")
	dst := filepath.Join(t.TempDir(), "back")
	h.Must(t, "cp", "web:/work/tree", dst)
	if data, err := os.ReadFile(filepath.Join(dst, "new")); err != nil || string(data) != "made-inside\n" {
		t.Fatalf("copied out: %q %v", data, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "sub/f")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode of the round-tripped file: %v %v", fi, err)
	}

	// Stats.
	var u sbx.Usage
	out := h.Must(t, "stats", "--no-stream", "--format", "json", "web")
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatal(err)
	}
	if u.Pids == 0 || u.MemoryCurrentBytes == 0 || u.MemoryLimitBytes != 64<<20 || u.CPUTimeS == 0 || !strings.Contains(out, `"cpu_time_s"`) {
		t.Fatalf("stats: %+v", u)
	}

	// Pause, resume, stop, start.
	h.Must(t, "pause", "web")
	if sb := h.Inspect(t, "web"); sb.Status != sbx.StatusPaused {
		t.Fatalf("after pause: %s", sb.Status)
	}
	if r := h.Sbx(t, "", "exec", "web", "--", "true"); r.Code == 0 {
		t.Fatal("exec in a paused sandbox succeeded")
	}
	h.Must(t, "resume", "web")
	h.Must(t, "exec", "web", "--", "true")
	if r := h.Sbx(t, "", "rm", "web"); r.Code == 0 {
		t.Fatal("rm of a running sandbox without -f succeeded")
	}
	h.Must(t, "exec", "web", "--", "sh", "-c", "echo kept > /work/state")
	h.Must(t, "stop", "--time", "2s", "web")
	if sb := h.Inspect(t, "web"); sb.Status != sbx.StatusStopped || sb.Pid != 0 {
		t.Fatalf("after stop: %s pid %d", sb.Status, sb.Pid)
	}
	if out := h.Must(t, "ps", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("ps without -a lists a stopped sandbox: %q", out)
	}
	if out := h.Must(t, "ps", "-aq"); strings.TrimSpace(out) != id {
		t.Fatalf("ps -a: %q", out)
	}
	h.Must(t, "start", "web")
	if out := h.Must(t, "exec", "web", "--", "cat", "/work/state"); out != "kept\n" {
		t.Fatalf("writable layer after stop/start: %q", out)
	}
	h.Must(t, "rm", "-f", "web")
	if r := h.Sbx(t, "", "inspect", "web"); r.Code != 1 {
		t.Fatalf("inspect after rm: code %d", r.Code)
	}
	h.AssertNoLeaks(t)
}

// Bad input gets a clear error and creates nothing.
func TestLifecycleBadInput(t *testing.T) {
	h := harness.NewHost(t)
	root := fixture.BusyboxRootfs(t)
	for _, args := range [][]string{
		{"create"},
		{"create", "--rootfs", root, "img"},
		{"create", "--rootfs", "/nonexistent"},
		{"create", "--rootfs", root, "--name", "bad/name"},
		{"create", "--rootfs", root, "--memory", "lots"},
		{"create", "--rootfs", root, "-v", "/nonexistent:/x"},
		{"create", "--rootfs", root, "-v", "nocolon"},
		{"create", "--rootfs", root, "--tmpfs", "/x:size=huge"},
		{"create", "--rootfs", root, "--label", "novalue"},
		{"create", "--rootfs", root, "--timeout", "5s"},
		{"exec", "nosuch", "--", "true"},
		{"rm", "nosuch"},
		{"cp", "/tmp", "/tmp"},
	} {
		r := h.Sbx(t, "", args...)
		if r.Code == 0 || strings.TrimSpace(r.Stderr) == "" {
			t.Errorf("sbx %v: code %d stderr %q: want a failure with a message", args, r.Code, r.Stderr)
		}
	}
	h.AssertNoLeaks(t)
}

// Two CLI processes act on one sandbox at once: the locks serialise them
// and they agree on the outcome.
func TestLifecycleConcurrentCLI(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)

	// Pause/resume racing with execs: every exec either runs or is refused
	// as paused; the sandbox ends consistent.
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if i == 0 {
					h.Sbx(t, "", "pause", id)
					h.Sbx(t, "", "resume", id)
				} else {
					h.Sbx(t, "", "exec", id, "--", "true")
				}
			}
		}()
	}
	wg.Wait()
	h.Sbx(t, "", "resume", id)
	if sb := h.Inspect(t, id); sb.Status != sbx.StatusRunning {
		t.Fatalf("after the race: %s", sb.Status)
	}
	h.Must(t, "exec", id, "--", "true")

	// Two removes at once: exactly one removes, the other finds nothing.
	results := make([]harness.Result, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.Sbx(t, "", "rm", "-f", id)
		}()
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		switch r.Code {
		case 0:
			ok++
		case 1:
			if !strings.Contains(r.Stderr, "no such sandbox") {
				t.Errorf("losing rm: %q", r.Stderr)
			}
		default:
			t.Errorf("rm: code %d stderr %q", r.Code, r.Stderr)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 2 concurrent removes succeeded, want 1", ok)
	}

	// Two creates with one name at once: exactly one wins.
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.Sbx(t, "", "create", "--rootfs", fixture.BusyboxRootfs(t), "--name", "same")
		}()
	}
	wg.Wait()
	ok = 0
	for _, r := range results {
		if r.Code == 0 {
			ok++
			h.Saw(strings.TrimSpace(r.Stdout))
		} else if !strings.Contains(r.Stderr, "already in use") {
			t.Errorf("losing create: code %d %q", r.Code, r.Stderr)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 2 creates with one name succeeded, want 1", ok)
	}
}

// Pause stops CPU use; resume continues it.
func TestLifecyclePauseStopsCPU(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	// The busy loop runs as an exec that lasts the whole test.
	loop := h.Command("exec", "--timeout", "60s", id, "--", "sh", "-c", "while :; do :; done")
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = loop.Process.Kill(); _ = loop.Wait() }()
	time.Sleep(200 * time.Millisecond)
	cpu := func() time.Duration {
		var u sbx.Usage
		if err := json.Unmarshal([]byte(h.Must(t, "stats", "--no-stream", "--format", "json", id)), &u); err != nil {
			t.Fatal(err)
		}
		return time.Duration(u.CPUTimeS * float64(time.Second))
	}
	// Windows of a second: even on a loaded 2-core machine a busy loop
	// gets far more than 50 ms of CPU in one, a frozen one nothing.
	c0 := cpu()
	time.Sleep(time.Second)
	c1 := cpu()
	if c1-c0 < 50*time.Millisecond {
		t.Fatalf("the busy loop used %v in 1s before the pause", c1-c0)
	}
	h.Must(t, "pause", id)
	c2 := cpu()
	time.Sleep(time.Second)
	c3 := cpu()
	if c3-c2 > 5*time.Millisecond {
		t.Fatalf("a paused sandbox used %v of CPU in 1s", c3-c2)
	}
	h.Must(t, "resume", id)
	time.Sleep(time.Second)
	if c4 := cpu(); c4-c3 < 50*time.Millisecond {
		t.Fatalf("after resume the loop used only %v in 1s", c4-c3)
	}
}

// Writes beyond --disk fail inside with ENOSPC; the host is untouched.
func TestLifecycleDiskCap(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--disk", "8m")
	r := h.Sbx(t, "", "exec", id, "--", "sh", "-c", "dd if=/dev/zero of=/big bs=1M count=32 2>&1; echo rc=$?")
	if !strings.Contains(r.Stdout, "No space left on device") || strings.Contains(r.Stdout, "rc=0") {
		t.Fatalf("writing 32 MiB under --disk 8m: %q", r.Stdout)
	}
	// The sandbox keeps working, and freeing space frees it.
	h.Must(t, "exec", id, "--", "rm", "/big")
	h.Must(t, "exec", id, "--", "sh", "-c", "dd if=/dev/zero of=/small bs=1M count=4 2>/dev/null")
}

// Volumes: read-only and read-write, with ownership as seen on the host
// (idmap=host: the sandbox's uid 1000 is the host's).
func TestLifecycleVolumes(t *testing.T) {
	h := harness.NewHost(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "input"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(rw, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	id := h.Create(t, "-v", ro+":/in:ro", "-v", rw+":/out:idmap=host", "--tmpfs", "/scratch:size=1m")
	if out := h.Must(t, "exec", id, "--", "cat", "/in/input"); out != "data" {
		t.Fatalf("read-only volume reads %q", out)
	}
	r := h.Sbx(t, "", "exec", id, "--", "sh", "-c", "echo x > /in/new")
	if r.Code == 0 || !strings.Contains(r.Stderr, "Read-only file system") {
		t.Fatalf("write to a read-only volume: code %d %q", r.Code, r.Stderr)
	}
	h.Must(t, "exec", "-u", "1000:1000", id, "--", "sh", "-c", "echo result > /out/file")
	fi, err := os.Stat(filepath.Join(rw, "file"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Fatalf("file written by uid 1000 is owned by %d:%d on the host", st.Uid, st.Gid)
	}
	r = h.Sbx(t, "", "exec", id, "--", "sh", "-c", "dd if=/dev/zero of=/scratch/f bs=1M count=2 2>&1")
	if !strings.Contains(r.Stdout, "No space left") {
		t.Fatalf("a 1m tmpfs took 2 MiB: %q", r.Stdout)
	}
	h.Must(t, "rm", "-f", id)
	if _, err := os.Stat(filepath.Join(rw, "file")); err != nil {
		t.Fatalf("rm removed a file of a volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ro, "input")); err != nil {
		t.Fatalf("rm removed a file of a volume: %v", err)
	}
}

// A sandbox with --ttl is removed once it expires, with no daemon: a
// background `sbx expiry-watcher` started by create removes it on time and
// exits when no sandbox has a deadline; any sbx command also reaps.
func TestLifecycleTTL(t *testing.T) {
	h := harness.NewHost(t)
	short := h.Create(t, "--ttl", "1s", "--name", "brief")
	long := h.Create(t, "--ttl", "1h")
	// The run directory of the long-lived one proves the layout (the short
	// one's may be gone already: a create can take over 1s under load).
	if _, err := os.Stat(filepath.Join(h.Run, "sandboxes", long)); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(h.Run, "sandboxes", short)
	// No sbx command runs meanwhile: the reaper alone must remove it.
	harness.WaitFor(t, func() bool {
		_, err := os.Stat(runDir)
		return os.IsNotExist(err)
	})
	out := strings.Fields(h.Must(t, "ps", "-aq"))
	if len(out) != 1 || out[0] != long {
		t.Fatalf("after the ttl of %s: ps -a lists %v", short, out)
	}
	if r := h.Sbx(t, "", "inspect", "brief"); r.Code != 1 {
		t.Fatalf("the name of an expired sandbox still resolves")
	}
	h.AssertNoLeaksOf(t, short)
	if n := reapers(h, t); n != 1 {
		t.Fatalf("%d expiry watchers run, want 1", n)
	}
	h.Must(t, "rm", "-f", long)
	harness.WaitFor(t, func() bool { return reapers(h, t) == 0 })
}

// reapers counts the expiry-watcher processes of this host's state.
func reapers(h *harness.Host, t testing.TB) int {
	t.Helper()
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), "expiry-watcher") && strings.Contains(string(cmdline), h.Root) {
			n++
		}
	}
	return n
}

// sbx killed with SIGKILL at each step of create; sbx gc then leaves
// nothing behind: not the named volume the create made on first use
// either, but the user's that it named stays, and so does one it made
// that a volume create took over after the kill.
func TestLifecycleKilledCreate(t *testing.T) {
	h := harness.NewHost(t)
	h.Must(t, "volume", "create", "mine")
	defer h.Must(t, "volume", "rm", "mine")
	for _, step := range sandbox.CreateSteps {
		t.Run(step, func(t *testing.T) {
			r := h.SbxEnv(t, []string{"SBX_TEST_CRASH_AT=" + step}, "", "create", "--rootfs", fixture.BusyboxRootfs(t), "--name", "crashy", "--ttl", "1h",
				"--network", "bridge", "-p", "127.0.0.1:0:80", "-v", "made:/made", "-v", "mine:/mine", "-v", "taken:/taken")
			if r.Code != -1 {
				t.Fatalf("sbx was not killed at %s: code %d %s", step, r.Code, r.Stderr)
			}
			ids := strings.Fields(h.Must(t, "ps", "-aq"))
			if len(ids) != 1 {
				t.Fatalf("after the kill: %d sandboxes listed, want 1 (creating)", len(ids))
			}
			h.Saw(ids[0])
			h.Must(t, "volume", "create", "taken")
			defer h.Must(t, "volume", "rm", "taken")
			out := h.Must(t, "gc")
			if !strings.Contains(out, "removed interrupted "+ids[0]) {
				t.Fatalf("gc output: %q", out)
			}
			if vols := strings.Fields(h.Must(t, "volume", "ls", "-q")); strings.Join(vols, " ") != "mine taken" {
				t.Errorf("volumes after gc: %q, want only the user's (mine, taken)", vols)
			}
			h.AssertNoLeaks(t)
		})
	}
}

// A bridged sandbox gets an address on sbx0 and published ports; rm
// releases its lease, namespace and rules.
func TestLifecycleBridge(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--network", "bridge", "-p", "127.0.0.1:0:8080")
	sb := h.Inspect(t, id)
	if sb.Network == nil || !sb.Network.IP.IsValid() || len(sb.Network.Ports) != 1 || sb.Network.Ports[0].HostPort == 0 {
		t.Fatalf("inspect of a bridged sandbox: %+v", sb.Network)
	}
	out := h.Must(t, "exec", id, "--", "sh", "-c", "ip -4 -o addr show eth0")
	if !strings.Contains(out, sb.Network.IP.String()+"/") {
		t.Fatalf("eth0 inside: %q, want %s", out, sb.Network.IP)
	}
	// The sandbox survives a stop and start with the same address.
	h.Must(t, "stop", "--time", "1s", id)
	h.Must(t, "start", id)
	if out := h.Must(t, "exec", id, "--", "sh", "-c", "ip -4 -o addr show eth0"); !strings.Contains(out, sb.Network.IP.String()+"/") {
		t.Fatalf("eth0 after restart: %q", out)
	}
	h.Must(t, "rm", "-f", id)
	h.AssertNoLeaks(t)
}

// 200 sandboxes created and removed leave no mounts, cgroups, directories
// or processes.
func TestLifecycleManyNoLeaks(t *testing.T) {
	h := harness.NewHost(t)
	const n = 200
	ids := make([]string, 0, n)
	for range n {
		ids = append(ids, h.Create(t, "--label", "batch=1"))
	}
	out := strings.Fields(h.Must(t, "ps", "-q", "--filter", "label=batch=1"))
	if len(out) != n {
		t.Fatalf("ps lists %d of %d sandboxes", len(out), n)
	}
	h.Must(t, append([]string{"rm", "-f"}, ids...)...)
	h.AssertNoLeaks(t)
}

// Limits from the environment: a clear error instead of a new sandbox.
func TestLifecycleLimits(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_MAX_SANDBOXES=1"}
	h.Create(t)
	r := h.Sbx(t, "", "create", "--rootfs", fixture.BusyboxRootfs(t))
	if r.Code == 0 || !strings.Contains(r.Stderr, "maximum is 1") {
		t.Fatalf("create over the maximum: code %d %q", r.Code, r.Stderr)
	}
	h.Env = []string{"SBX_MEMORY_BUDGET=100m"}
	r = h.Sbx(t, "", "create", "--rootfs", fixture.BusyboxRootfs(t), "--memory", "200m")
	if r.Code == 0 || !strings.Contains(r.Stderr, "memory budget") {
		t.Fatalf("create over the memory budget: code %d %q", r.Code, r.Stderr)
	}
}

// Sandboxes outlive the sbx process that created them, and a freshly
// started sbx re-adopts them (here: exec, stats and rm from new processes
// after the creator's whole process group is gone).
func TestLifecycleOutlivesCreator(t *testing.T) {
	h := harness.NewHost(t)
	cmd := h.Command("create", "--rootfs", fixture.BusyboxRootfs(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	h.Saw(id)
	if out := h.Must(t, "exec", id, "--", "echo", "alive"); out != "alive\n" {
		t.Fatalf("exec after the creator exited: %q", out)
	}
	if r := h.Sbx(t, "", "gc"); r.Code != 0 || strings.Contains(r.Stdout, id) {
		t.Fatalf("gc touched a healthy sandbox: %q %q", r.Stdout, r.Stderr)
	}
	h.Must(t, "exec", id, "--", "true")
}

// A named volume that a killed create made on first use, then used by a
// run that wrote into it and is gone, is the user's: gc, undoing the
// killed create, leaves it and what the run wrote.
func TestLifecycleKilledCreateVolumeUsedSince(t *testing.T) {
	h := harness.NewHost(t)
	r := h.SbxEnv(t, []string{"SBX_TEST_CRASH_AT=" + sandbox.CreateSteps[len(sandbox.CreateSteps)-1]}, "",
		"create", "--rootfs", fixture.BusyboxRootfs(t), "-v", "made:/made")
	if r.Code != -1 {
		t.Fatalf("sbx was not killed: code %d %s", r.Code, r.Stderr)
	}
	ids := strings.Fields(h.Must(t, "ps", "-aq"))
	if len(ids) != 1 {
		t.Fatalf("after the kill: %d sandboxes listed, want 1 (creating)", len(ids))
	}
	h.Saw(ids[0])
	h.Must(t, "run", "--rootfs", fixture.BusyboxRootfs(t), "-v", "made:/d", "--", "sh", "-c", "echo kept > /d/f")
	out := h.Must(t, "gc")
	if !strings.Contains(out, "removed interrupted "+ids[0]) {
		t.Fatalf("gc output: %q", out)
	}
	if got := h.Must(t, "run", "--rootfs", fixture.BusyboxRootfs(t), "-v", "made:/d", "--", "cat", "/d/f"); strings.TrimSpace(got) != "kept" {
		t.Errorf("the run's file in the volume after gc: %q, want kept", got)
	}
	h.Must(t, "volume", "rm", "made")
	h.AssertNoLeaks(t)
}
