package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// libcontainer joins a container's mount namespace from a locked thread
// that it never unlocks; should that thread be the main one, Go cannot end
// it and the whole process's /proc/self then shows the container's mounts.
// Keeping the main goroutine on the main thread prevents that.
// sandboxedExecutor is an executor running as PID 1 of a sandbox.
type sandboxedExecutor struct {
	ctr    *isolate.Container
	root   *rootfs.Root
	client *client.Client
	waited chan unix.WaitStatus
}

// startSandboxedExecutor starts `/.sbx/sbx executor --listen-fd 3` as PID 1
// of a sandbox over the given root, the way the sandbox Host does: the
// host creates the listening socket and passes it in, so the client can
// connect at once.
func startSandboxedExecutor(t *testing.T, lower string, limits cgroup.Limits) *sandboxedExecutor {
	t.Helper()
	dir := t.TempDir()
	b := make([]byte, 4)
	rand.Read(b)
	id := "exectest-" + hex.EncodeToString(b)
	root, err := rootfs.Prepare(filepath.Join(dir, "fs"), []string{lower}, rootfs.Options{Hostname: id, Dirs: []string{"/.sbx"}})
	if err != nil {
		t.Fatalf("prepare root: %v", err)
	}
	t.Cleanup(func() {
		if err := root.Release(); err != nil {
			t.Errorf("release root: %v", err)
		}
	})
	sock := filepath.Join(dir, "executor.sock")
	lf, err := client.ListenFile(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	var stderr lockedWriter
	stderr.w = &strings.Builder{}
	spec := &isolate.Spec{
		ID:     id,
		Rootfs: root.Path,
		Args: append(client.Args(isolate.ExecutorPath, "", []string{"PATH=" + isolate.DefaultPath, "LANG=C.UTF-8"}, "/root"),
			"--log-level", "debug", "--stop-timeout", "2s"),
		Env:      []string{"PATH=" + isolate.DefaultPath},
		Cwd:      "/",
		Hostname: id,
		Seccomp:  "default",
		Limits:   limits,
		Network:  isolate.NetworkNone,
		Mounts: []specs.Mount{{
			Source: executorBinary(t), Destination: isolate.ExecutorPath, Type: "bind",
			Options: []string{"bind", "ro", "nodev", "nosuid"},
		}},
		HelperSeccomp:     true,
		ParentDeathSignal: int(syscall.SIGKILL),
	}
	ctr, err := isolate.Start(filepath.Join(dir, "state", "containers"), spec, isolate.IO{
		Stdout: &stderr, Stderr: &stderr, ExtraFiles: []*os.File{lf},
	})
	if err != nil {
		t.Fatalf("start sandbox: %v", err)
	}
	se := &sandboxedExecutor{ctr: ctr, root: root, waited: make(chan unix.WaitStatus, 1),
		client: client.New(sock, client.Options{Timeout: 30 * time.Second})}
	go func() {
		ws, _ := ctr.Wait()
		se.waited <- ws
	}()
	t.Cleanup(func() {
		se.client.Close()
		select {
		case <-se.waited:
		default:
			_ = ctr.Kill()
			<-se.waited
		}
		if err := ctr.Destroy(); err != nil {
			t.Errorf("destroy: %v", err)
		}
		if t.Failed() {
			t.Logf("executor output:\n%s", stderr.String())
		}
	})
	return se
}

// stop sends SIGTERM to PID 1 and expects a clean exit.
func (se *sandboxedExecutor) stop(t *testing.T) {
	t.Helper()
	if err := se.ctr.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case ws := <-se.waited:
		se.waited <- ws
		if !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("executor as PID 1 ended with %v", ws)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("executor as PID 1 did not stop within 30s of SIGTERM")
	}
}

func TestExecutorInSandbox(t *testing.T) {
	se := startSandboxedExecutor(t, fixture.DebianRootfs(t), cgroup.Limits{Pids: 128, MemoryBytes: 512 << 20})
	c := se.client
	ctx := harness.Context(t)
	// No readiness polling: the socket exists before PID 1 starts.
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	exec := func(req api.ExecRequest) api.ExecResult {
		t.Helper()
		res, err := c.Exec(ctx, req)
		if err != nil {
			t.Fatalf("exec %v: %v", req, err)
		}
		return res
	}
	res := exec(api.ExecRequest{Command: "echo $$; cat /proc/1/cmdline | tr '\\0' ' '; echo; pwd; echo $LANG"})
	lines := strings.Split(res.Stdout, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[1], "/.sbx/executor executor ") || !strings.Contains(lines[1], "--listen-fd 3") || lines[2] != "/root" || lines[3] != "C.UTF-8" {
		t.Fatalf("inside: %q", res.Stdout)
	}

	t.Run("reaps orphans as PID 1", func(t *testing.T) {
		for i := 0; i < 10; i++ {
			exec(api.ExecRequest{Command: "sleep 0.1 >/dev/null 2>&1 &"})
		}
		var zombies string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			r := exec(api.ExecRequest{Command: "ps -eo stat=,pid=,comm= | grep -v ' ps$' | grep -e '^Z' -e sleep || true"})
			zombies = r.Stdout
			if zombies == "" {
				break
			}
		}
		if zombies != "" {
			t.Fatalf("orphans not reaped:\n%s", zombies)
		}
	})

	t.Run("session", func(t *testing.T) {
		s := newSession(t, c, api.SessionRequest{})
		s.ok("cd /tmp && export A=1 && f() { echo f$1; }")
		wantOutput(t, "state", s.ok(`echo "$A $PWD"; f 2; readlink /proc/$$/exe`), "1 /tmp\nf2\n/usr/bin/bash\n")
		// (python starts in over a second on a loaded machine: the silence
		// that ends the call must be longer than its start.)
		r := s.run(api.RunRequest{Command: `python3 -c 'print(input("q? ") * 2)'`, NoOutputTimeoutS: secs(4)})
		if r.Status != api.StatusRunning || r.Output != "q? " {
			t.Fatalf("prompt: %+v", r)
		}
		r = s.run(api.RunRequest{Command: "ab", IsInput: true})
		wantOutput(t, "python", r.Output, "abab\n")
		r = s.run(api.RunRequest{Command: "sleep 50", NoOutputTimeoutS: secs(0.3)})
		r = s.run(api.RunRequest{Command: "C-c", IsInput: true})
		if r.Status != api.StatusCompleted || *r.ExitCode != 130 {
			t.Fatalf("C-c: %+v", r)
		}
	})

	t.Run("files", func(t *testing.T) {
		if _, err := c.WriteFile(ctx, "/root/notes/a.txt", strings.NewReader("hello\n"), 0); err != nil {
			t.Fatal(err)
		}
		if r := exec(api.ExecRequest{Command: "cat notes/a.txt"}); r.Stdout != "hello\n" {
			t.Fatalf("cat: %+v", r)
		}
		if _, err := c.Edit(ctx, api.EditRequest{Command: "str_replace", Path: "/root/notes/a.txt", OldStr: strp("hello"), NewStr: strp("bye")}); err != nil {
			t.Fatal(err)
		}
		// The file lives in the sandbox's writable layer, not on the host.
		data, err := os.ReadFile(filepath.Join(se.root.Path, "root/notes/a.txt"))
		if err != nil || string(data) != "bye\n" {
			t.Fatalf("in the sandbox root: %q %v", data, err)
		}
		if _, err := os.Stat("/root/notes/a.txt"); err == nil {
			t.Fatal("the file landed on the host's /root")
		}
	})

	t.Run("info sees the cgroup limits", func(t *testing.T) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Pids.Limit != 128 || info.Memory.LimitBytes != 512<<20 || info.Pids.Current < 1 {
			t.Fatalf("info: %+v", info)
		}
	})

	t.Run("survives kill -9 -1 and a fork bomb at the pids limit", func(t *testing.T) {
		s := newSession(t, c, api.SessionRequest{})
		s.ok("sleep 100 &")
		// kill(-1) reaches every process but PID 1 and the caller.
		r := exec(api.ExecRequest{Command: "kill -9 -1; echo caller-survives"})
		if r.Stdout != "caller-survives\n" {
			t.Fatalf("kill -9 -1: %+v", r)
		}
		r = exec(api.ExecRequest{Argv: []string{"bash", "-c", "b() { b | b & }; b; sleep 100"}, Timeout: 3 * time.Second})
		if !r.TimedOut || !strings.Contains(r.Stderr, "fork") {
			t.Fatalf("fork bomb did not time out after hitting the pids limit: %+v", r)
		}
		var left string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			res, err := c.Exec(ctx, api.ExecRequest{Command: "ps -eo pid=,comm= | grep -v -e ' ps$' -e ' sh$' -e ' grep$' | grep -v ' 1 sbx' | grep -v '^ *1 ' || true"})
			if err == nil && res.Stdout == "" {
				left = ""
				break
			}
			left = res.Stdout
		}
		if left != "" {
			t.Fatalf("processes left after the bomb:\n%s", left)
		}
		// The session's shell died with kill -1: the session says so and
		// starts a fresh shell.
		out := s.run(api.RunRequest{Command: "echo back"})
		if out.Output != "back\n" {
			t.Fatalf("session after kill -1: %+v", out)
		}
		if _, err := c.Health(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SIGTERM reaches commands before the end", func(t *testing.T) {
		go func() {
			_, _ = c.Exec(context.Background(), api.ExecRequest{Command: "trap 'echo bye > /tmp/term; exit 0' TERM; touch /tmp/ready; sleep 100 & wait"})
		}()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(se.root.Path, "tmp/ready")); err == nil {
				break
			}
		}
		se.stop(t)
		data, err := os.ReadFile(filepath.Join(se.root.Path, "tmp/term"))
		if err != nil || string(data) != "bye\n" {
			t.Fatalf("command did not get SIGTERM: %q %v", data, err)
		}
	})
}

// TestExecutorInBusyboxSandbox runs sessions with busybox sh as the only
// shell, inside a sandbox whose image has no bash.
func TestExecutorInBusyboxSandbox(t *testing.T) {
	se := startSandboxedExecutor(t, fixture.BusyboxRootfs(t), cgroup.Limits{Pids: 64})
	s, err := se.client.CreateSession(harness.Context(t), api.SessionRequest{Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Shell != "/bin/sh" {
		t.Fatalf("shell %q, want /bin/sh", s.Shell)
	}
	ss := &sess{t: t, c: se.client, id: s.ID}
	wantOutput(t, "busybox", ss.ok("x=4; cd /; echo $((x*2)) $PWD; readlink /proc/$$/exe"), "8 /\n/bin/busybox\n")
	r := ss.run(api.RunRequest{Command: "set -e; false"})
	if r.Status != api.StatusExited {
		t.Fatalf("set -e: %+v", r)
	}
	wantOutput(t, "fresh", ss.ok("echo ${x:-unset} $PWD"), "unset /\n")
	res, err := se.client.Exec(harness.Context(t), api.ExecRequest{Command: "id -u", User: "user"})
	if err != nil || res.Stdout != "1000\n" {
		t.Fatalf("exec as user: %+v %v", res, err)
	}
	se.stop(t)

}
