package tests

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/fixture"
)

// The adversarial suite: what a hostile tenant tries from inside a
// sandbox, and what a hostile executor sends to the host. docs/security.md
// lists every check and what it proves.

// confinement are the lines of /proc/self/status that say how a process
// is confined: seccomp mode, no_new_privs and capability sets.
var confinement = []string{"Seccomp:", "NoNewPrivs:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}

// statusLines returns the confinement lines of a /proc/self/status dump.
func statusLines(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		for _, k := range confinement {
			if strings.HasPrefix(l, k) {
				got[k] = strings.TrimSpace(strings.TrimPrefix(l, k))
			}
		}
	}
	return got
}

// TestAdversarialAttachedProcessesAreConfined: processes started with
// `sbx exec -i`, `sbx exec -t` and `sbx shell` are confined exactly like
// those of plain `sbx exec`: seccomp filter on (mode 2), no_new_privs,
// the same capability sets. (They ran without seccomp when a host-side
// setns process started them.)
func TestAdversarialAttachedProcessesAreConfined(t *testing.T) {
	h := newLCHost(t)
	id := h.create(t)
	want := statusLines(h.must(t, "exec", id, "--", "cat", "/proc/self/status"))
	if want["Seccomp:"] != "2" || want["NoNewPrivs:"] != "1" || len(want) != len(confinement) {
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
		r := h.sbx(t, tc.stdin, tc.args...)
		if r.code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, r.code, r.stderr)
			continue
		}
		got := statusLines(r.stdout)
		for _, k := range confinement {
			if got[k] != want[k] {
				t.Errorf("%s: %s %q, plain exec has %q", tc.name, k, got[k], want[k])
			}
		}
	}
}

var (
	adversaryOnce sync.Once
	adversaryDir  string
	adversaryErr  error
)

// adversaryRoot returns a busybox root with the adversary program (package
// tests/adversary) at /adversary, shared by the tests of the process.
func adversaryRoot(t testing.TB) string {
	t.Helper()
	adversaryOnce.Do(func() {
		adversaryDir, adversaryErr = os.MkdirTemp("", "sbx-adversary-")
		if adversaryErr != nil {
			return
		}
		atExit = append(atExit, func() { os.RemoveAll(adversaryDir) })
		fixture.NewBusyboxRootfs(t, filepath.Join(adversaryDir, "root"))
		build := exec.Command("go", "build", "-o", filepath.Join(adversaryDir, "root", "adversary"), "./adversary")
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

// results parses the adversary's "NAME RESULT" lines.
func results(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			got[l[:i]] = l[i+1:]
		}
	}
	return got
}

// expect fails unless every check in want has its result in out.
func expect(t *testing.T, what, out string, want map[string]string) {
	t.Helper()
	got := results(out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s gave %q, want %q (output %q)", what, k, got[k], v, out)
		}
	}
}

// TestAdversarialSbxProcessesCannotBeTakenOver: root inside a sandbox can
// neither ptrace sbx's PID 1 (the executor of a long-lived sandbox, the
// init of a one-shot run) nor open its memory or descriptors: both are
// non-dumpable, and the sandbox has no CAP_SYS_PTRACE. And no command
// inherits a descriptor of the host's above 2.
func TestAdversarialSbxProcessesCannotBeTakenOver(t *testing.T) {
	root := adversaryRoot(t)
	want := map[string]string{"ptrace": "EPERM", "procmem": "EACCES", "procfd": "EACCES", "fds": ""}
	script := "/adversary ptrace 1; /adversary procmem 1; /adversary procfd 1; /adversary fds"

	r := runSbx(t, "", "run", "--rootfs", root, "--", "sh", "-c", script)
	expect(t, "sbx run", r.stdout, want)
	// The same command as PID 1's direct child, without a shell between.
	r = runSbx(t, "", "run", "--rootfs", root, "--", "/adversary", "fds")
	expect(t, "sbx run (direct)", r.stdout, map[string]string{"fds": ""})

	h := newLCHost(t)
	id := strings.TrimSpace(h.must(t, "create", "--rootfs", root))
	h.saw(id)
	expect(t, "sbx exec", h.must(t, "exec", id, "--", "sh", "-c", script), want)
	expect(t, "sbx exec (direct)", h.must(t, "exec", id, "--", "/adversary", "fds"), map[string]string{"fds": ""})
	// A session's shell and an attached command are the executor's
	// children too.
	expect(t, "sbx exec -i", h.sbx(t, "", "exec", "-i", id, "--", "sh", "-c", script).stdout, want)
	assertNoLeftovers(t)
}

// TestAdversarialOneShotStatusCannotBeForged: the command of a one-shot
// run can neither write the status the host reads (it was fd 3) nor block
// it by filling the pipe; the report is what the kernel says.
func TestAdversarialOneShotStatusCannotBeForged(t *testing.T) {
	root := adversaryRoot(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	r := runSbx(t, "", "run", "--rootfs", root, "--report", rep, "--", "sh", "-c",
		`/adversary status 3 '{"exit_code":0}'; /adversary status 3 '{"exit_code":0}' 2>/dev/null; exit 3`)
	if r.code != 3 {
		t.Errorf("forged status: exit %d, want the command's 3; stdout %q stderr %q", r.code, r.stdout, r.stderr)
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
	cmd := exec.Command(sbxBin, "run", "--rootfs", root, "--", "sh", "-c", "/adversary fill 3; /adversary fill 4; exit 5")
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
		runSbx(t, "", "gc") // what the killed run left
	}
	assertNoLeftovers(t)
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
