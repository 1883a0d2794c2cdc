package run

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// runReport runs sbx run with a JSON report and returns the result and report.
func runReport(t *testing.T, args ...string) (harness.Result, sbx.Report) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.json")
	r := harness.RunSbx(t, "", append([]string{"run", "--report", path}, args...)...)
	var rep sbx.Report
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no report (exit %d, stderr %q): %v", r.Code, r.Stderr, err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("bad report %s: %v", data, err)
	}
	return r, rep
}

// dockerCapMask is CapEff of Docker's default capability set.
const dockerCapMask = "00000000a80425fb"

func TestRunIsolationBusybox(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	script := `
echo "pid=$$"
echo "host=$(hostname)"
echo "net=$(ls /sys/class/net | tr '\n' ' ')"
grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status
echo "procs=$(ls -d /proc/[0-9]* | wc -l)"
unshare -U true 2>/dev/null && echo unshare=allowed || echo unshare=denied
mount -t tmpfs none /mnt 2>/dev/null && echo mount=allowed || echo mount=denied
mknod /tmp/sda b 8 0 2>/dev/null && echo mknod=allowed || echo mknod=denied
hostname other 2>/dev/null && echo sethostname=allowed || echo sethostname=denied
dmesg >/dev/null 2>&1 && echo dmesg=allowed || echo dmesg=denied
(echo 1 > /proc/sys/kernel/panic) 2>/dev/null && echo procsys=allowed || echo procsys=denied
(echo 1 > /sys/kernel/profiling) 2>/dev/null && echo sys=allowed || echo sys=denied
echo "keys=$(wc -c < /proc/keys) timer_list=$(wc -c < /proc/timer_list)"
echo "cgroup=$(cut -d: -f3 /proc/self/cgroup | sort -u | tr '\n' ' ')"
ip link set lo down 2>/dev/null && echo netadmin=allowed || echo netadmin=denied
`
	out := harness.MustRun(t, "run", "--rootfs", root, "--hostname", "box", "--", "sh", "-c", script)
	want := []string{
		"host=box",
		"net=lo ",
		"NoNewPrivs:\t1",
		"Seccomp:\t2",
		"CapEff:\t" + dockerCapMask,
		"CapBnd:\t" + dockerCapMask,
		"unshare=denied", "mount=denied", "mknod=denied", "sethostname=denied", "dmesg=denied",
		"procsys=denied", "sys=denied", "keys=0 timer_list=0", "cgroup=/ ", "netadmin=denied",
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") && !strings.Contains(out, w) {
			t.Errorf("missing %q in output:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "pid=") || strings.Contains(out, fmt.Sprintf("pid=%d\n", os.Getpid())) {
		t.Errorf("the sandbox's PID view is not its own: %q", out)
	}
	// Only the sandbox's own processes: init, sh, the subshell of $(...), ls.
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "procs="); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			if n < 2 || n > 5 {
				t.Errorf("sandbox sees %d processes, want only its own (2-5)", n)
			}
		}
	}
	harness.AssertNoLeftovers(t)
}

func TestRunHostMode(t *testing.T) {
	out := harness.MustRun(t, "run", "--", "sh", "-c", `
ls -d /root /home /var/lib /srv /mnt /run/sbx 2>&1 | grep -c 'No such file'
test -e /etc/shadow && echo shadow=visible || echo shadow=hidden
test -e /etc/gshadow && echo gshadow=visible || echo gshadow=hidden
cat /etc/passwd >/dev/null && echo passwd=readable
touch /usr/sbx-test 2>/dev/null && echo usr=writable || echo usr=readonly
echo private > /etc/sbx-private && echo etc=private-writable
pwd
echo tmp > /tmp/x && echo tmp=writable
ls /proc | grep -c '^[0-9]'
`)
	for _, w := range []string{"6\n", "shadow=hidden", "gshadow=hidden", "passwd=readable", "usr=readonly", "etc=private-writable", "/workspace\n", "tmp=writable"} {
		if !strings.Contains(out, w) {
			t.Errorf("host mode: missing %q in:\n%s", w, out)
		}
	}
	if _, err := os.Stat("/etc/sbx-private"); err == nil {
		os.Remove("/etc/sbx-private")
		t.Fatal("a write to /etc inside the sandbox reached the host")
	}
	if _, err := os.Stat("/usr/sbx-test"); err == nil {
		os.Remove("/usr/sbx-test")
		t.Fatal("a write to /usr inside the sandbox reached the host")
	}
	harness.AssertNoLeftovers(t)
}

func TestRunExitCodesAndSignals(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	cases := []struct {
		name   string
		args   []string
		code   int
		status sbx.RunStatus
		signal string
	}{
		{"ok", []string{"true"}, 0, sbx.RunOK, ""},
		{"exit3", []string{"sh", "-c", "exit 3"}, 3, sbx.RunNonzeroExit, ""},
		{"sigterm", []string{"sh", "-c", "kill -TERM $$"}, 143, sbx.RunSignaled, "SIGTERM"},
		{"sigkill", []string{"sh", "-c", "kill -KILL $$"}, 137, sbx.RunSignaled, "SIGKILL"},
		{"notfound", []string{"no-such-command"}, 127, sbx.RunError, ""},
		{"notexec", []string{"/etc/passwd"}, 126, sbx.RunError, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, rep := runReport(t, append([]string{"--rootfs", root, "--"}, c.args...)...)
			if r.Code != c.code || rep.ExitCode != c.code || rep.Status != c.status || rep.Signal != c.signal {
				t.Errorf("exit %d, report %+v; want exit %d status %s signal %q (stderr %q)", r.Code, rep, c.code, c.status, c.signal, r.Stderr)
			}
		})
	}
	t.Run("sbx-failure", func(t *testing.T) {
		r := harness.RunSbx(t, "", "run", "--memory", "lots", "--rootfs", root, "true")
		if r.Code != 125 || !strings.Contains(r.Stderr, "--memory") {
			t.Errorf("bad flag: exit %d stderr %q, want 125 and a message naming the flag", r.Code, r.Stderr)
		}
		r = harness.RunSbx(t, "", "run", "--rootfs", "/nonexistent", "true")
		if r.Code != 125 || !strings.Contains(r.Stderr, "not a directory") {
			t.Errorf("bad rootfs: exit %d stderr %q", r.Code, r.Stderr)
		}
	})
	harness.AssertNoLeftovers(t)
}

func TestRunStdio(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	r := harness.RunSbx(t, "hello from stdin\n", "run", "-i", "--rootfs", root, "--", "sh", "-c", "cat; echo to-stderr >&2")
	if r.Code != 0 || r.Stdout != "hello from stdin\n" || r.Stderr != "to-stderr\n" {
		t.Errorf("stdio: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	// Without -i stdin is empty.
	r = harness.RunSbx(t, "ignored\n", "run", "--rootfs", root, "--", "cat")
	if r.Code != 0 || r.Stdout != "" {
		t.Errorf("stdin without -i: exit %d stdout %q", r.Code, r.Stdout)
	}
	// -t gives the command a terminal.
	r = harness.RunSbx(t, "", "run", "-t", "--rootfs", root, "--", "sh", "-c", "test -t 0 && test -t 1 && tty")
	if r.Code != 0 || !strings.Contains(r.Stdout, "/dev/pts/") {
		t.Errorf("tty: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

func TestRunOptions(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	envFile := filepath.Join(t.TempDir(), "env")
	os.WriteFile(envFile, []byte("# comment\nFROM_FILE=1\nOVERRIDE=file\n"), 0o644)
	out := harness.MustRun(t, "run", "--rootfs", root, "-e", "A=b c", "--env-file", envFile, "-e", "OVERRIDE=flag",
		"-w", "/home/user", "-u", "1000:1000", "--", "sh", "-c", `echo "$A|$FROM_FILE|$OVERRIDE|$(pwd)|$(id -u):$(id -g)"; grep CapEff /proc/self/status`)
	if !strings.Contains(out, "b c|1|flag|/home/user|1000:1000\n") {
		t.Errorf("env/workdir/user: %q", out)
	}
	if !strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Errorf("a non-root user must have no effective capabilities: %q", out)
	}
	out = harness.MustRun(t, "run", "--rootfs", root, "--read-only", "--", "sh", "-c", "touch /x 2>/dev/null && echo root=rw || echo root=ro; touch /tmp/x && echo tmp=rw")
	if out != "root=ro\ntmp=rw\n" {
		t.Errorf("--read-only: %q", out)
	}
	out = harness.MustRun(t, "run", "--rootfs", root, "--seccomp", "unconfined", "--cap-drop", "ALL", "--", "grep", "-E", "^(Seccomp|CapEff):", "/proc/self/status")
	if out != "CapEff:\t0000000000000000\nSeccomp:\t0\n" {
		t.Errorf("unconfined, cap-drop ALL: %q", out)
	}
	out = harness.MustRun(t, "run", "--rootfs", root, "--cap-drop", "NET_RAW", "--cap-add", "SYS_ADMIN", "--", "grep", "^CapEff:", "/proc/self/status")
	if out != "CapEff:\t00000000a82405fb\n" {
		t.Errorf("cap-add SYS_ADMIN, cap-drop NET_RAW: %q", out)
	}
	profile := filepath.Join(t.TempDir(), "profile.json")
	os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644)
	out = harness.MustRun(t, "run", "--rootfs", root, "--seccomp", profile, "--", "sh", "-c", "mkdir /tmp/d 2>&1 || echo denied")
	if !strings.Contains(out, "denied") {
		t.Errorf("custom seccomp profile not applied: %q", out)
	}
	r := harness.RunSbx(t, "", "run", "--rootfs", root, "--cap-add", "NOT_A_CAP", "true")
	if r.Code != 125 || !strings.Contains(r.Stderr, "unknown capability") {
		t.Errorf("unknown capability: exit %d stderr %q", r.Code, r.Stderr)
	}
	harness.AssertNoLeftovers(t)
}

func TestRunMemoryLimitOOM(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	r, rep := runReport(t, "-m", "32m", "--rootfs", root, "--", "awk", `BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }`)
	if r.Code != 137 || rep.Status != sbx.RunOOM || !rep.OOMKilled {
		t.Fatalf("memory hog: exit %d report %+v, want 137 and status oom", r.Code, rep)
	}
	if rep.MemoryPeakBytes == 0 || rep.MemoryPeakBytes > 40<<20 {
		t.Errorf("peak memory %d outside (0, 40 MiB] under a 32 MiB limit", rep.MemoryPeakBytes)
	}
	// Within the limit, nothing is killed and the peak is reported.
	r, rep = runReport(t, "-m", "64m", "--rootfs", root, "--", "sh", "-c", "head -c 16m /dev/zero | tr '\\0' x > /tmp/f; true")
	if r.Code != 0 || rep.OOMKilled || rep.MemoryPeakBytes < 16<<20 {
		t.Errorf("within limit: exit %d report %+v, want ok with peak >= 16 MiB (tmpfs pages count)", r.Code, rep)
	}
	harness.AssertNoLeftovers(t)
}

func TestRunPidsLimit(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	// A fork bomb holds at the limit (busybox sh gives up at "can't fork"),
	// or the timeout ends it; either way the run ends and the host is fine.
	start := time.Now()
	r, rep := runReport(t, "--pids-limit", "32", "--timeout", "3s", "--rootfs", root, "--", "sh", "-c", "f() { f | f & }; f; sleep 107")
	if r.Code == 0 || rep.Status == sbx.RunOK {
		t.Errorf("fork bomb: exit %d report %+v, want a failure", r.Code, rep)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("fork bomb run took %v", time.Since(start))
	}
	// Counting processes: the 40th background sleep cannot start.
	out := harness.RunSbx(t, "", "run", "--pids-limit", "20", "--rootfs", root, "--", "sh", "-c",
		"i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done; echo started=$i").Stdout
	if strings.Contains(out, "started=40") {
		t.Errorf("40 processes started under --pids-limit 20: %q", out)
	}
	if n := harness.CountHostProcesses(t, "sleep 107"); n != 0 {
		t.Errorf("%d fork bomb processes survived the run", n)
	}
	harness.AssertNoLeftovers(t)
}

func TestRunCPUQuota(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	_, rep := runReport(t, "--cpus", "0.5", "--timeout", "3s", "--rootfs", root, "--", "sh", "-c", "while :; do :; done")
	if rep.Status != sbx.RunTimeout {
		t.Fatalf("spinner: report %+v", rep)
	}
	// The quota caps the share; a loaded machine may give less (at load 26
	// on two CPUs, 0.17), never more. The spinner must have run at all.
	share := rep.CPUTimeS / rep.WallTimeS
	if share < 0.01 || share > 0.6 {
		t.Errorf("--cpus 0.5 gave %.2f of a CPU (cpu %.2fs over %.2fs wall), want at most about 0.5", share, rep.CPUTimeS, rep.WallTimeS)
	}
}

func TestRunTimeoutKillsTree(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	start := time.Now()
	r, rep := runReport(t, "--timeout", "1s", "--rootfs", root, "--", "sh", "-c", "setsid sleep 101 & (trap '' TERM; sleep 102) & sleep 103")
	elapsed := time.Since(start)
	if r.Code != 124 || rep.Status != sbx.RunTimeout || !rep.TimedOut {
		t.Errorf("timeout: exit %d report %+v", r.Code, rep)
	}
	if elapsed > 5*time.Second {
		t.Errorf("timeout of 1s took %v to end the run", elapsed)
	}
	for _, p := range []string{"sleep 101", "sleep 102", "sleep 103"} {
		if n := harness.CountHostProcesses(t, p); n != 0 {
			t.Errorf("%q survived the timeout", p)
		}
	}
	harness.AssertNoLeftovers(t)
}

func TestRunRootfsUnchanged(t *testing.T) {
	dir := fixture.NewBusyboxRootfs(t, filepath.Join(t.TempDir(), "root"))
	os.WriteFile(filepath.Join(dir, "etc", "keep"), []byte("original\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc", "gone"), []byte("original\n"), 0o644)
	before := treeHash(t, dir)
	harness.MustRun(t, "run", "--rootfs", dir, "--", "sh", "-c", "echo new > /etc/keep && rm /etc/gone && rm -r /bin/vi && mkdir /newdir && echo x > /newdir/f && chmod 700 /etc")
	if after := treeHash(t, dir); after != before {
		t.Fatal("the --rootfs directory changed during a run")
	}
	harness.AssertNoLeftovers(t)
}

func TestRunSignalsToSbx(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(harness.SbxBin, "run", "--rootfs", root, "--", "sleep", "104")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 104") == 1 })
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("sbx did not exit after %v", sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
				t.Errorf("after %v sbx exited %d, want %d", sig, code, 128+int(sig))
			}
			if n := harness.CountHostProcesses(t, "sleep 104"); n != 0 {
				t.Errorf("the command survived %v to sbx", sig)
			}
			harness.AssertNoLeftovers(t)
		})
	}
	// SIGKILL leaves state behind; sbx gc removes it.
	cmd := exec.Command(harness.SbxBin, "run", "--rootfs", root, "--", "sleep", "105")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 105") == 1 })
	cmd.Process.Kill()
	cmd.Wait()
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 105") == 0 }) // parent-death signal
	harness.MustRun(t, "gc")
	harness.AssertNoLeftovers(t)
}

func TestRunManyNoLeaks(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	for i := 0; i < 20; i++ {
		switch i % 4 {
		case 0:
			harness.MustRun(t, "run", "--rootfs", root, "true")
		case 1:
			harness.RunSbx(t, "", "run", "--rootfs", root, "--timeout", "200ms", "sleep", "10")
		case 2:
			harness.RunSbx(t, "", "run", "--rootfs", root, "sh", "-c", "kill -9 $$")
		case 3:
			harness.RunSbx(t, "", "run", "-m", "16m", "--rootfs", root, "awk", `BEGIN { s = "xxxxxxxx"; while (1) s = s s }`)
		}
	}
	harness.AssertNoLeftovers(t)
}

func TestRunDebianRootfs(t *testing.T) {
	root := fixture.DebianRootfs(t)
	out := harness.MustRun(t, "run", "--rootfs", root, "--", "bash", "-c", "python3 -c 'print(6*7)'; ps -e --no-headers | wc -l")
	if !strings.HasPrefix(out, "42\n") {
		t.Errorf("python3 in the Debian root: %q", out)
	}
}

// treeHash hashes names, modes, owners, link targets and contents of a tree.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		fmt.Fprintf(h, "%s %v %d %d %d\n", p, info.Mode(), st.Uid, st.Gid, info.Size())
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			fmt.Fprintln(h, target)
		} else if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestRunSmallPidsLimitAndPeak(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	// The limit is the command's: sbx's own init does not eat into it.
	r, rep := runReport(t, "--pids-limit", "4", "--rootfs", root, "--", "sh", "-c", "sleep 0.3 & sleep 0.3 & wait; echo done")
	if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
		t.Fatalf("--pids-limit 4 with 3 processes: exit %d stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if rep.PidsPeak == nil || *rep.PidsPeak < 3 {
		t.Errorf("pids_peak %v, want at least the command's 3 processes", rep.PidsPeak)
	}
	// sbx's init has a fixed allowance on top (cgroup.InitPidsAllowance), so
	// the command gets at least its limit, and never the allowance's worth more.
	out := harness.RunSbx(t, "", "run", "--pids-limit", "4", "--rootfs", root, "--", "sh", "-c", "i=0; while [ $i -lt 30 ]; do sleep 5 & i=$((i+1)); done; echo started=$i").Stdout
	if strings.Contains(out, "started=30") {
		t.Errorf("30 processes started under --pids-limit 4: %q", out)
	}
	if r := harness.RunSbx(t, "", "run", "--cpus", "1000", "--rootfs", root, "true"); r.Code != 125 || !strings.Contains(r.Stderr, "CPUs") {
		t.Errorf("--cpus above the host's CPUs: exit %d %q", r.Code, r.Stderr)
	}
	harness.MustRun(t, "run", "--pids-limit", "-1", "--rootfs", root, "true")
	harness.AssertNoLeftovers(t)
}

func TestRunHostModeHidesSecretsInEtc(t *testing.T) {
	// A secret deep below /etc, and one created while the sandbox runs under
	// a known secret name, both stay hidden.
	dir := "/etc/sbx-test-deep/a/b/c/d"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll("/etc/sbx-test-deep") })
	if err := os.WriteFile(dir+"/secret", []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := harness.RunSbx(t, "", "run", "--", "sh", "-c", "cat /etc/sbx-test-deep/a/b/c/d/secret 2>&1; ls /etc/ssl/private /etc/shadow 2>&1; cat /etc/hostname").Stdout
	if strings.Contains(out, "TOPSECRET") || strings.Contains(out, "root:") {
		t.Errorf("host mode shows secrets: %q", out)
	}
}

func TestRunInfoAndVersion(t *testing.T) {
	if out := harness.MustRun(t, "version"); !strings.HasPrefix(out, "sbx ") {
		t.Errorf("version: %q", out)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(harness.MustRun(t, "info", "--format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"kernel", "cgroup_mode", "cgroup_controllers", "seccomp", "overlayfs", "user_namespaces", "uses"} {
		if _, ok := info[k]; !ok {
			t.Errorf("sbx info has no %q: %v", k, info)
		}
	}
	if info["seccomp"] != true {
		t.Error("sbx info: the test binary must have seccomp support")
	}
}

// TestRunCgroupView: a sandbox sees its own cgroups at /sys/fs/cgroup,
// read-only, with its limits; on v1 and hybrid hosts only the hierarchies
// that carry limits and usage are shown (cpu, cpuacct, cpuset, memory,
// pids), and the hidden ones still apply: the devices cgroup denies a
// device node the sandbox may create (CAP_MKNOD) but not open.
func TestRunCgroupView(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	out := harness.MustRun(t, "run", "--rootfs", root, "--memory", "64m", "--", "sh", "-c", `
echo "view=$(ls /sys/fs/cgroup | tr '\n' ' ')"
cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null | sed 's/^/limit=/'
(echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes || echo 1 > /sys/fs/cgroup/memory.max) 2>/dev/null && echo write=allowed || echo write=denied
mkdir /sys/fs/cgroup/x 2>/dev/null && echo mkdir=allowed || echo mkdir=denied
mknod /tmp/sda b 8 0 2>/dev/null || echo mknod=denied
head -c 1 /tmp/sda >/dev/null 2>&1 && echo device=readable || echo device=denied
awk '$5 ~ "^/sys/fs/cgroup" || $5 == "/.sbx/init" { print "mount=" $5 " " $6 }' /proc/self/mountinfo`)
	for _, want := range []string{"limit=67108864\n", "write=denied\n", "mkdir=denied\n", "device=denied\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// The binds of the cgroup view and of sbx's init are read-only, nosuid
	// and nodev (the view noexec too), set by one mount_setattr each.
	binds := 0
	for _, l := range strings.Split(out, "\n") {
		m, ok := strings.CutPrefix(l, "mount=")
		if !ok {
			continue
		}
		binds++
		target, opts, _ := strings.Cut(m, " ")
		want := []string{"ro", "nosuid", "nodev", "noexec"}
		if target == isolate.InitPath {
			want = want[:3]
		}
		for _, o := range want {
			if !slices.Contains(strings.Split(opts, ","), o) {
				t.Errorf("mount %s has options %s, want %s", target, opts, o)
			}
		}
	}
	if binds < 2 {
		t.Errorf("found %d binds of the cgroup view and the init, want at least 2:\n%s", binds, out)
	}
	if cgroup.DetectMode() == cgroup.ModeV2 {
		return
	}
	view := ""
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "view="); ok {
			view = v
		}
	}
	for _, c := range strings.Fields(view) {
		ok := false
		for _, part := range strings.Split(c, ",") {
			ok = ok || map[string]bool{"cpu": true, "cpuacct": true, "cpuset": true, "memory": true, "pids": true}[part]
		}
		if !ok {
			t.Errorf("the sandbox sees the %s hierarchy: view %q", c, view)
		}
	}
	for _, want := range []string{"memory", "pids"} {
		if !strings.Contains(" "+view, " "+want+" ") {
			t.Errorf("the sandbox does not see its %s hierarchy: view %q", want, view)
		}
	}
}

func TestRunDevicesAndEtcFiles(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	out := harness.MustRun(t, "run", "--rootfs", root, "--hostname", "devbox", "--", "sh", "-c", `
ls /dev | tr '\n' ' '; echo
head -c 1 /dev/zero | wc -c
mknod /tmp/mem c 1 1 2>/dev/null && (head -c 1 /tmp/mem >/dev/null 2>&1 && echo mem=readable || echo mem=denied) || echo mem=denied
cat /etc/hostname; grep -c devbox /etc/hosts; test -f /etc/resolv.conf && echo resolv=yes
grep -E "^memory|^pids" /proc/self/cgroup | head -1 >/dev/null; echo ok`)
	for _, want := range []string{"full", "null", "ptmx", "pts", "random", "shm", "tty", "urandom", "zero", "mqueue", "\n1\n", "mem=denied", "devbox\n1\n", "resolv=yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// Capabilities added on the command line open the matching syscalls.
	out = harness.MustRun(t, "run", "--rootfs", root, "--cap-add", "SYS_ADMIN", "--", "sh", "-c", "mount -t tmpfs none /tmp && echo mount=allowed")
	if !strings.Contains(out, "mount=allowed") {
		t.Errorf("--cap-add SYS_ADMIN must allow mount: %q", out)
	}
}

// TestRunWorkdirThatIsAFile: a working directory that the root has as a
// file (busybox's /bin/sh, a symlink to /bin/busybox, or a path below
// that file) is refused as invalid before anything is made, for a run
// and a create, and nothing is left; a new directory beside it is made,
// and /bin/sh still runs.
func TestRunWorkdirThatIsAFile(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	for _, wd := range []string{"/bin/sh", "/bin/busybox", "/bin/sh/sub", "/bin/../bin/busybox/x/y"} {
		r := harness.RunSbx(t, "", "run", "--rootfs", root, "-w", wd, "--", "true")
		if r.Code == 0 || !strings.Contains(r.Stderr, "is not a directory in root directory") {
			t.Errorf("run -w %s: exit %d, stderr %q; want the working directory refused", wd, r.Code, r.Stderr)
		}
	}
	harness.AssertNoLeftovers(t)
	h := harness.NewHost(t)
	r := h.Sbx(t, "", "create", "--rootfs", root, "-w", "/bin/sh")
	if r.Code == 0 || !strings.Contains(r.Stderr, "working directory /bin/sh is not a directory") {
		t.Errorf("create -w /bin/sh: exit %d, stdout %q, stderr %q; want it refused", r.Code, r.Stdout, r.Stderr)
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Errorf("a refused create left sandboxes: %v", ids)
	}
	if out := harness.MustRun(t, "run", "--rootfs", root, "-w", "/bin/new", "--", "/bin/sh", "-c", "pwd"); out != "/bin/new\n" {
		t.Errorf("run -w /bin/new: %q", out)
	}
}
