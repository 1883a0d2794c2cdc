package security

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// The adversarial suite: what a hostile tenant tries from inside a
// sandbox, and what a hostile executor sends to the host. docs/security.md
// lists every check and what it proves.

// TestAdversarialAttachedProcessesAreConfined: processes started with
// `sbx exec -i`, `sbx exec -t` and `sbx shell` are confined exactly like
// those of plain `sbx exec`: seccomp filter on (mode 2), no_new_privs,
// the same capability sets. (They ran without seccomp when a host-side
// setns process started them.)
func TestAdversarialAttachedProcessesAreConfined(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	want := harness.StatusLines(h.Must(t, "exec", id, "--", "cat", "/proc/self/status"))
	if want["Seccomp:"] != "2" || want["NoNewPrivs:"] != "1" || len(want) != len(harness.ConfinementLines) {
		t.Fatalf("plain exec is not confined: %v", want)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"exec -i", []string{"exec", "-i", id, "--", "cat", "/proc/self/status"}, ""},
		{"exec -t", []string{"exec", "-t", id, "--", "cat", "/proc/self/status"}, ""},
		{"exec -it", []string{"exec", "-it", id, "--", "cat", "/proc/self/status"}, ""},
		{"shell", []string{"shell", id}, "cat /proc/self/status; exit\n"},
	} {
		r := h.Sbx(t, tc.stdin, tc.args...)
		if r.Code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, r.Code, r.Stderr)
			continue
		}
		got := harness.StatusLines(r.Stdout)
		for _, k := range harness.ConfinementLines {
			if got[k] != want[k] {
				t.Errorf("%s: %s %q, plain exec has %q", tc.name, k, got[k], want[k])
			}
		}
	}
}

// TestAdversarialSbxProcessesCannotBeTakenOver: root inside a sandbox can
// neither ptrace sbx's PID 1 (the executor of a long-lived sandbox, the
// init of a one-shot run) nor open its memory or descriptors: both are
// non-dumpable, and the sandbox has no CAP_SYS_PTRACE. And no command
// inherits a descriptor of the host's above 2.
func TestAdversarialSbxProcessesCannotBeTakenOver(t *testing.T) {
	root := harness.AdversaryRoot(t)
	want := map[string]string{"ptrace": "EPERM", "procmem": "EACCES", "procfd": "EACCES", "fds": ""}
	script := "/adversary ptrace 1; /adversary procmem 1; /adversary procfd 1; /adversary fds"

	r := harness.RunSbx(t, "", "run", "--rootfs", root, "--", "sh", "-c", script)
	harness.ExpectAdversary(t, "sbx run", r.Stdout, want)
	// The same command as PID 1's direct child, without a shell between.
	r = harness.RunSbx(t, "", "run", "--rootfs", root, "--", "/adversary", "fds")
	harness.ExpectAdversary(t, "sbx run (direct)", r.Stdout, map[string]string{"fds": ""})

	h := harness.NewHost(t)
	id := strings.TrimSpace(h.Must(t, "create", "--rootfs", root))
	h.Saw(id)
	harness.ExpectAdversary(t, "sbx exec", h.Must(t, "exec", id, "--", "sh", "-c", script), want)
	harness.ExpectAdversary(t, "sbx exec (direct)", h.Must(t, "exec", id, "--", "/adversary", "fds"), map[string]string{"fds": ""})
	// A session's shell and an attached command are the executor's
	// children too.
	harness.ExpectAdversary(t, "sbx exec -i", h.Sbx(t, "", "exec", "-i", id, "--", "sh", "-c", script).Stdout, want)
	harness.AssertNoLeftovers(t)
}

// TestAdversarialOneShotStatusCannotBeForged: the command of a one-shot
// run can neither write the status the host reads (it was fd 3) nor block
// it by filling the pipe; the report is what the kernel says.
func TestAdversarialOneShotStatusCannotBeForged(t *testing.T) {
	root := harness.AdversaryRoot(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	r := harness.RunSbx(t, "", "run", "--rootfs", root, "--report", rep, "--", "sh", "-c",
		`/adversary status 3 '{"exit_code":0}'; /adversary status 3 '{"exit_code":0}' 2>/dev/null; exit 3`)
	if r.Code != 3 {
		t.Errorf("forged status: exit %d, want the command's 3; stdout %q stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	var got struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
	}
	data, _ := os.ReadFile(rep)
	if err := json.Unmarshal(data, &got); err != nil || got.ExitCode != 3 || got.Status != "nonzero_exit" {
		t.Errorf("report %s: %+v %v", data, got, err)
	}
	// Filling the pipe must not hang sbx run; the test gives it a minute.
	cmd := exec.Command(harness.SbxBin, "run", "--rootfs", root, "--", "sh", "-c", "/adversary fill 3; /adversary fill 4; exit 5")
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
			t.Errorf("after filling the pipes: %v, want exit 5", err)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Error("sbx run hangs after the command filled its status pipe")
		harness.RunSbx(t, "", "gc") // what the killed run left
	}
	harness.AssertNoLeftovers(t)
}

// fakeExecutor serves h on a unix socket as a taken-over executor would,
// and returns a client of it with short timeouts.
func fakeExecutor(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "executor.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := client.New(sock, client.Options{Timeout: time.Second, IdleTimeout: 500 * time.Millisecond, TransferTimeout: time.Minute})
	t.Cleanup(c.Close)
	return c
}

// tarOf builds a tar stream of headers (regular files get body "owned").
func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len("owned"))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size == int64(len("owned")) {
			tw.Write([]byte("owned"))
		}
	}
	tw.Close()
	return b.Bytes()
}

// hugeFileTar is a directory and the start of a 1 TiB file in it.
func hugeFileTar(t *testing.T) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{{Name: "data", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: "data/huge", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40}} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	b.Write(make([]byte, 1<<20))
	return b.Bytes()
}

// TestAdversarialHostileExecutorCopyFrom: what a taken-over executor sends
// for `sbx cp ID:SRC DST` never lands outside DST, never follows a link it
// created, and is not installed at all unless it is a valid tree; a silent
// executor does not hold the copy.
func TestAdversarialHostileExecutorCopyFrom(t *testing.T) {
	for _, tc := range []struct {
		name, src, dst string // dst relative to the user's home
		stream         []byte
		silent         bool
	}{
		// The audit's case: destination not existing yet, a symlink to "."
		// as the copied file, then a file through it.
		{name: "symlink to . then through it", src: "/etc/report.txt", dst: "report.txt", stream: tarOf(t,
			&tar.Header{Name: "report.txt", Typeflag: tar.TypeSymlink, Linkname: "."},
			&tar.Header{Name: "report.txt/.bashrc", Typeflag: tar.TypeReg, Mode: 0o644})},
		{name: "entry beside the copy in an existing directory", src: "/data", dst: ".", stream: tarOf(t,
			&tar.Header{Name: "data", Typeflag: tar.TypeDir, Mode: 0o755},
			&tar.Header{Name: ".bashrc", Typeflag: tar.TypeReg, Mode: 0o644})},
		{name: "symlink out of the copy then through it", src: "/data", dst: "new", stream: tarOf(t,
			&tar.Header{Name: "data", Typeflag: tar.TypeDir, Mode: 0o755},
			&tar.Header{Name: "data/x", Typeflag: tar.TypeSymlink, Linkname: "../.."},
			&tar.Header{Name: "data/x/.bashrc", Typeflag: tar.TypeReg, Mode: 0o644})},
		{name: "device", src: "/data", dst: "new", stream: tarOf(t,
			&tar.Header{Name: "data", Typeflag: tar.TypeDir, Mode: 0o755},
			&tar.Header{Name: "data/sda", Typeflag: tar.TypeBlock, Devmajor: 8})},
		{name: "a file larger than any copy", src: "/data", dst: "new", stream: hugeFileTar(t)},
		{name: "silence", src: "/data", dst: "new", silent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeExecutor(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/fs/archive" {
					http.Error(w, "no", http.StatusNotFound)
					return
				}
				if tc.silent {
					<-r.Context().Done()
					return
				}
				w.Write(tc.stream)
			})
			outer := t.TempDir()
			home := filepath.Join(outer, "home")
			os.MkdirAll(home, 0o755)
			os.WriteFile(filepath.Join(home, ".bashrc"), []byte("mine"), 0o644)
			start := time.Now()
			err := client.CopyFrom(context.Background(), c, tc.src, filepath.Join(home, tc.dst))
			if err == nil {
				t.Fatal("the copy succeeded")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the copy took %v", d)
			}
			if strings.ContainsRune(err.Error(), 0x1b) {
				t.Errorf("error has escape sequences: %q", err)
			}
			entries, _ := os.ReadDir(home)
			data, _ := os.ReadFile(filepath.Join(home, ".bashrc"))
			if len(entries) != 1 || string(data) != "mine" {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("the home directory changed: %v, .bashrc %q (error %v)", names, data, err)
			}
			if left, _ := os.ReadDir(outer); len(left) != 1 {
				t.Errorf("something landed beside the home directory: %v", left)
			}
		})
	}
}

// TestAdversarialKilledBridgedCreates: `sbx create --network bridge`
// killed with SIGKILL at every moment of its start, then one `sbx gc`:
// nothing of any of them is left (leases, namespaces, veths, rules,
// mounts, cgroups), and `sbx network reset` is not refused.
func TestAdversarialKilledBridgedCreates(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	h := harness.NewHost(t)
	for i := 0; i < 16; i++ {
		cmd := h.Command("create", "--network", "bridge", "--rootfs", root)
		cmd.Env = os.Environ()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(4+4*i) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if r := h.Sbx(t, "", "gc"); r.Code != 0 {
		t.Fatalf("gc: exit %d %s", r.Code, r.Stderr)
	}
	// Creates that finished before the kill are sandboxes like any other.
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) > 0 {
		for _, id := range ids {
			h.Saw(id)
		}
		h.Must(t, append([]string{"rm", "-f"}, ids...)...)
	}
	if left := harness.BridgeLeftovers(t, h.Root, h.Run, h.Netns); len(left) > 0 {
		t.Errorf("after kill -9 of bridged creates and one gc: %v", left)
	}
	if r := h.Sbx(t, "", "network", "reset"); r.Code != 0 {
		t.Errorf("network reset after the killed creates: exit %d %s", r.Code, r.Stderr)
	}
}

// TestAdversarialKilledServerDuringBridgedCreates: the server killed with
// SIGKILL while clients create bridged sandboxes; the restarted server
// (which recovers at start) and one gc leave nothing behind.
func TestAdversarialKilledServerDuringBridgedCreates(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	h := harness.NewHost(t)
	dir := t.TempDir()
	sock, token := filepath.Join(dir, "sbx.sock"), filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(harness.ServerTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := []string{"SBX_HOST=unix://" + sock, "SBX_TOKEN_FILE=" + token}
	serve := func() *exec.Cmd {
		cmd := h.Command(append([]string{"serve", "--unix", sock, "--token-file", token, "--allow-host-dir", fixture.CacheDir}, harness.ExecutorBinaryFlag()...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if r := h.SbxEnv(t, remote, "", "ps", "-q"); r.Code == 0 {
				return cmd
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatal("sbx serve did not answer within 20s")
			}
		}
	}
	for round := 0; round < 5; round++ {
		srv := serve()
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.SbxEnv(t, remote, "", "create", "--network", "bridge", "--rootfs", root)
			}()
		}
		time.Sleep(time.Duration(20+25*round) * time.Millisecond)
		_ = srv.Process.Kill()
		_ = srv.Wait()
		wg.Wait()
	}
	srv := serve()
	if r := h.SbxEnv(t, remote, "", "gc"); r.Code != 0 {
		t.Errorf("gc through the restarted server: exit %d %s", r.Code, r.Stderr)
	}
	if ids := strings.Fields(h.SbxEnv(t, remote, "", "ps", "-aq").Stdout); len(ids) > 0 {
		for _, id := range ids {
			h.Saw(id)
		}
		if r := h.SbxEnv(t, remote, "", append([]string{"rm", "-f"}, ids...)...); r.Code != 0 {
			t.Errorf("rm -f: %s", r.Stderr)
		}
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	_ = srv.Wait()
	if left := harness.BridgeLeftovers(t, h.Root, h.Run, h.Netns); len(left) > 0 {
		t.Errorf("after kill -9 of the server during bridged creates, a restart and one gc: %v", left)
	}
}

// TestAdversarialGCBesideLifecycle: `sbx gc` in a loop beside create,
// exec and rm -f cycles never makes one of them fail and never takes over
// (removes as "interrupted") a sandbox a live process holds.
func TestAdversarialGCBesideLifecycle(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	h := harness.NewHost(t)
	stop := make(chan struct{})
	gcDone := make(chan []string)
	go func() {
		var bad []string
		for {
			select {
			case <-stop:
				gcDone <- bad
				return
			default:
			}
			r := h.Sbx(t, "", "gc")
			if r.Code != 0 || strings.Contains(r.Stdout, "interrupted") || strings.Contains(r.Stdout, "orphan") {
				bad = append(bad, fmt.Sprintf("gc exit %d: %s%s", r.Code, r.Stdout, r.Stderr))
			}
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 12; i++ {
				r := h.Sbx(t, "", "create", "--rootfs", root)
				id := strings.TrimSpace(r.Stdout)
				if r.Code == 0 {
					h.Saw(id)
					r = h.Sbx(t, "", "exec", id, "--", "true")
				}
				if r.Code == 0 {
					r = h.Sbx(t, "", "rm", "-f", id)
				}
				if r.Code != 0 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("exit %d: %s", r.Code, r.Stderr))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	for _, b := range <-gcDone {
		t.Errorf("gc beside live operations: %s", b)
	}
	for _, f := range failures {
		t.Errorf("a create, exec or rm beside gc failed: %s", f)
	}
}

// TestAdversarialSandboxLearnsNoHostPaths: what a sandbox reads about the
// host: its mounts name no state directory, run root or image cache
// (the helper binary's mount still shows where it is installed: see
// docs/security.md), a sandbox without a network gets no name server, and
// a host-mode sandbox gets its own machine-id.
func TestAdversarialSandboxLearnsNoHostPaths(t *testing.T) {
	h := harness.NewHost(t)
	root := fixture.BusyboxRootfs(t)
	id := h.Create(t, "--rootfs", root)
	check := func(what, mountinfo string) {
		t.Helper()
		for _, l := range strings.Split(mountinfo, "\n") {
			if strings.Contains(l, "/helpers/") {
				continue // the helper binary's bind mount, documented
			}
			for _, p := range []string{h.Root, h.Run, root, os.Getenv("SBX_RUN_ROOT"), fixture.CacheDir} {
				if p != "" && strings.Contains(l, p) {
					t.Errorf("%s: mountinfo names %s: %s", what, p, l)
				}
			}
		}
	}
	check("sbx exec", h.Must(t, "exec", id, "--", "cat", "/proc/self/mountinfo"))
	check("sbx run", harness.MustRun(t, "run", "--rootfs", root, "--", "cat", "/proc/self/mountinfo"))
	check("sbx run (host mode)", harness.MustRun(t, "run", "--", "cat", "/proc/self/mountinfo"))
	for what, out := range map[string]string{
		"sbx exec":            h.Must(t, "exec", id, "--", "cat", "/etc/resolv.conf"),
		"sbx run":             harness.MustRun(t, "run", "--rootfs", root, "--", "cat", "/etc/resolv.conf"),
		"sbx run (host mode)": harness.MustRun(t, "run", "--", "cat", "/etc/resolv.conf"),
	} {
		if strings.Contains(out, "nameserver") {
			t.Errorf("%s --network none: resolv.conf has a name server: %q", what, out)
		}
	}
	hostID, _ := os.ReadFile("/etc/machine-id")
	if got := harness.MustRun(t, "run", "--", "cat", "/etc/machine-id"); len(strings.TrimSpace(got)) != 32 || got == string(hostID) {
		t.Errorf("host mode machine-id %q (the host's is %q)", got, hostID)
	}
}

// TestAdversarialEscapeChecks runs every escape check in a one-shot run and
// in a long-lived sandbox (through the executor), in the host's user
// namespace and in a private one, and asserts its errno.
func TestAdversarialEscapeChecks(t *testing.T) {
	root := harness.AdversaryRoot(t)
	var script []string
	want := map[string]string{}
	// The sandbox's own cgroup limit, read-only whatever the host's mode.
	limit := "/sys/fs/cgroup/memory.max"
	if cgroup.DetectMode() != cgroup.ModeV2 {
		limit = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	}
	for _, c := range append(harness.EscapeChecks, harness.EscapeCheck{Args: "write " + limit, Want: "EROFS"}) {
		script = append(script, "/adversary "+c.Args)
		name := c.Args
		if f := strings.Fields(c.Args); f[0] == "ptrace" || f[0] == "mknod" {
			name = f[0] // the adversary reports these without their argument
		}
		want[name] = c.Want
	}
	sh := strings.Join(script, "; ")
	h := harness.NewHost(t)
	// A private user namespace's root must be able to reach its root.
	if err := os.Chmod(filepath.Dir(h.Run), 0o711); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"host", "private"} {
		w := want
		if mode == "private" {
			w = maps.Clone(want)
			// Host-owned kernel knobs refuse the namespace's root (an
			// unprivileged host id) before they are found read-only.
			for _, k := range []string{"write /proc/sys/kernel/hostname", "write /proc/sys/vm/drop_caches", "write " + limit} {
				w[k] = "EACCES"
			}
		}
		r := harness.RunSbx(t, "", "run", "--userns", mode, "--rootfs", root, "--", "sh", "-c", sh)
		harness.ExpectAdversary(t, "sbx run --userns "+mode, r.Stdout, w)
		id := strings.TrimSpace(h.Must(t, "create", "--userns", mode, "--rootfs", root))
		h.Saw(id)
		harness.ExpectAdversary(t, "sbx exec, --userns "+mode, h.Must(t, "exec", id, "--", "sh", "-c", sh), w)
	}
}

// TestAdversarialTIOCSTI: a sandbox given the user's terminal (sbx run -i
// from a terminal) cannot push input into it: it is not the sandbox's
// controlling terminal (the sandbox has a session of its own).
func TestAdversarialTIOCSTI(t *testing.T) {
	root := harness.AdversaryRoot(t)
	cmd := exec.Command(harness.SbxBin, "run", "-i", "--rootfs", root, "--", "/adversary", "tiocsti")
	ptm, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	out, _ := io.ReadAll(io.LimitReader(ptm, 4096)) // EIO once the child is gone
	_ = cmd.Wait()
	if !strings.Contains(string(out), "tiocsti EPERM") {
		t.Errorf("TIOCSTI on the user's terminal: %q, want EPERM", out)
	}
}

// TestAdversarialHostileExecutorCopyFromMemory: a taken-over executor's
// stream of tens of thousands of directories with 3.5 KiB names (a million
// entries was the audit's) is refused early, while the copy's memory stays
// bounded: sbx cp keeps nothing per file and a capped amount per
// directory.
func TestAdversarialHostileExecutorCopyFromMemory(t *testing.T) {
	const dirs = 40_000
	long := strings.Repeat("a", 250)
	prefix := "data"
	c := fakeExecutor(t, func(w http.ResponseWriter, r *http.Request) {
		tw := tar.NewWriter(w)
		dir := func(name string) error {
			return tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755})
		}
		p := prefix
		if dir(p) != nil {
			return
		}
		for i := 0; i < 14; i++ {
			p += "/" + long
			if dir(p) != nil {
				return
			}
		}
		for i := 0; i < dirs; i++ {
			if dir(fmt.Sprintf("%s/d%06d", p, i)) != nil {
				return
			}
		}
		tw.Close()
	})
	dst := filepath.Join(t.TempDir(), "new")
	var base, peak runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		var top uint64
		for {
			select {
			case <-stop:
				sampled <- top
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&peak)
			top = max(top, peak.HeapAlloc)
		}
	}()
	err := client.CopyFrom(context.Background(), c, "/data", dst)
	close(stop)
	top := <-sampled
	if err == nil {
		t.Error("a copy of tens of thousands of directories with 3.5 KiB names was accepted in full")
	}
	if grew := int64(top) - int64(base.HeapAlloc); grew > 48<<20 {
		t.Errorf("the copy's heap grew by %d MiB (error %v)", grew>>20, err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("the refused copy was installed")
	}
}

// TestAdversarialHostileExecutorLogs: `sbx logs` without -f (and the REST
// logs without follow, which take the same path) against a taken-over
// executor that stays silent ends after the idle deadline of a transfer,
// and one that streams without end is cut off at the largest log ring.
func TestAdversarialHostileExecutorLogs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"silent", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"silent after the headers", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			frame := []byte(`{"type":"stdout","offset":0,"data":"` + strings.Repeat("x", 4000) + `"}` + "\n")
			for r.Context().Err() == nil {
				if _, err := w.Write(frame); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeExecutor(t, tc.handler)
			start := time.Now()
			_, err := c.MainCmdLogs(context.Background(), client.LogOptions{TailBytes: -1}, func(execapi.LogFrame) error { return nil })
			if err == nil {
				t.Error("the logs of a hostile executor ended without an error")
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the logs without follow took %v (error %v)", d, err)
			}
		})
	}
}

// TestAdversarialUnknownPoolFill: filling a pool that does not exist is
// 404 over REST (it was 500) and leaves nothing behind.
func TestAdversarialUnknownPoolFill(t *testing.T) {
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	req, _ := http.NewRequest("POST", e.URL+"/v1/pools/no-such-pool/fill", nil)
	req.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("fill of an unknown pool: %d %s, want 404", resp.StatusCode, body)
	}
	if _, err := e.C.FillPool(context.Background(), "no-such-pool"); !errors.Is(err, sbx.ErrNotFound) {
		t.Errorf("client fill of an unknown pool: %v, want sbx.ErrNotFound", err)
	}
	ents, _ := os.ReadDir(filepath.Join(e.Root, "pools"))
	for _, ent := range ents {
		t.Errorf("left in the pools directory: %s", ent.Name())
	}
}

// TestAdversarialShortPrefixIsNotDestructive: rm, stop, kill and the REST
// DELETE refuse an id prefix of fewer than 4 characters (a client guessing
// ids with one character removed every sandbox); a longer unique prefix
// and a short name still work.
func TestAdversarialShortPrefixIsNotDestructive(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--name", "db")
	for _, args := range [][]string{{"rm", "-f", id[:1]}, {"stop", id[:3]}, {"kill", id[:2]}, {"rm", "-f", id[:3]}} {
		r := h.Sbx(t, "", args...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "at least 4") {
			t.Errorf("sbx %s: exit %d %s, want a refusal asking for 4 characters", strings.Join(args, " "), r.Code, r.Stderr)
		}
	}
	if got := h.Inspect(t, id); got.Status != sbx.StatusRunning {
		t.Errorf("after the refused operations the sandbox is %s", got.Status)
	}
	h.Must(t, "stop", "db")
	h.Must(t, "rm", "-f", id[:4])

	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	sb, err := e.C.Create(context.Background(), sbx.Options{Rootfs: fixture.BusyboxRootfs(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	for _, path := range []string{"/v1/sandboxes/" + sb.ID[:1], "/v1/sandboxes/" + sb.ID[:3] + "?force=true"} {
		req, _ := http.NewRequest("DELETE", e.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("DELETE %s: %d, want 400", path, resp.StatusCode)
		}
	}
	if _, err := e.C.Get(context.Background(), sb.ID); err != nil {
		t.Errorf("the sandbox is gone after refused deletes: %v", err)
	}
}

// TestAdversarialOneShotCannotReopenCallerOutput: a one-shot command gets
// pipes, not the caller's files: it cannot reopen the file its output is
// appended to through /proc/self/fd/1 (to read earlier jobs' output or
// truncate it), and its output and input still flow.
func TestAdversarialOneShotCannotReopenCallerOutput(t *testing.T) {
	root := harness.AdversaryRoot(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "jobs.log")
	if err := os.WriteFile(logPath, []byte("earlier-job-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in, err := os.Open(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(harness.SbxBin, "run", "-i", "--rootfs", root, "--", "sh", "-c",
		`echo "fd1=$(readlink /proc/self/fd/1)"; echo "fd0=$(readlink /proc/self/fd/0)"; `+
			`: > /proc/self/fd/1; : > /proc/self/fd/2; echo "stdin=$(head -c 4)"; echo last`)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = out, out, in
	if err := cmd.Run(); err != nil {
		t.Fatalf("sbx run: %v", err)
	}
	data, _ := os.ReadFile(logPath)
	got := string(data)
	if !strings.HasPrefix(got, "earlier-job-secret\n") {
		t.Errorf("the caller's file was truncated or rewritten: %q", got)
	}
	for _, want := range []string{"fd1=pipe:", "fd0=pipe:", "stdin=root", "last"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q: %q", want, got)
		}
	}
}

// TestAdversarialExecutorLogIsCapped: what a taken-over PID 1 writes to
// its stdout (here root with CAP_SYS_PTRACE, which can open PID 1's
// descriptors) does not grow the host's executor.log beyond its cap, and
// the executor keeps serving.
func TestAdversarialExecutorLogIsCapped(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--cap-add", "SYS_PTRACE")
	h.Sbx(t, "", "exec", id, "--", "sh", "-c",
		"timeout 20 sh -c 'head -c 20000000 /dev/zero > /proc/1/fd/1' 2>/dev/null; timeout 5 sh -c 'head -c 20000000 /dev/zero > /proc/1/fd/2' 2>/dev/null; true")
	fi, err := os.Stat(filepath.Join(h.Run, "sandboxes", id, "executor.log"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1<<20 {
		t.Errorf("executor.log grew to %d bytes", fi.Size())
	}
	if out := h.Must(t, "exec", id, "--", "echo", "still-serving"); !strings.Contains(out, "still-serving") {
		t.Errorf("the executor stopped serving: %q", out)
	}
}
