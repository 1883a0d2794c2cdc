package executor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

func TestExecutorHealthAndInfo(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	h, err := e.client.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version == "" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	info, err := e.client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.CPU.Count < 1 || info.Memory.TotalBytes == 0 || info.Disk.TotalBytes == 0 || info.Pids.Current < 1 {
		t.Fatalf("info incomplete: %+v", info)
	}
	// Unknown routes answer with the JSON error shape.
	resp, err := e.client.Do(ctx, "GET", "/v1/nope", nil, "", 1<<10)
	if !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("GET /v1/nope: %v %v", resp, err)
	}
}

// TestExecutorListensOnSocketPath covers --socket, the way the executor is
// run on its own outside a sandbox.
func TestExecutorListensOnSocketPath(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "x.sock")
	cmdDone := make(chan error, 1)
	c := client.New(sock, client.Options{Timeout: 5 * time.Second})
	defer c.Close()
	cmd := execCommand(sbxBinary(t), "executor", "--socket", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmdDone <- cmd.Wait() }()
	defer cmd.Process.Kill()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err = c.Health(context.Background()); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("executor on --socket never answered: %v", err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	_ = cmd.Process.Signal(sigterm)
	if err := <-cmdDone; err != nil {
		t.Fatalf("executor exit: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestExecutorExecBasics(t *testing.T) {
	e := startExecutor(t, "--env", "GREETING=hello", "--workdir", "/tmp")
	ctx := harness.Context(t)
	cases := []struct {
		name string
		req  api.ExecRequest
		want api.ExecResult
	}{
		{"argv", api.ExecRequest{Argv: []string{"echo", "a b"}}, api.ExecResult{Stdout: "a b\n"}},
		{"command", api.ExecRequest{Command: "echo out; echo err >&2; exit 3"}, api.ExecResult{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{"default env and workdir", api.ExecRequest{Command: `echo "$GREETING $PWD $HOME"`}, api.ExecResult{Stdout: "hello /tmp /root\n"}},
		{"request env and cwd", api.ExecRequest{Command: `echo "$GREETING $X $PWD"`, Env: []string{"X=y", "GREETING=hi"}, Cwd: "/"}, api.ExecResult{Stdout: "hi y /\n"}},
		{"relative cwd", api.ExecRequest{Command: "pwd", Cwd: "."}, api.ExecResult{Stdout: "/tmp\n"}},
		{"stdin", api.ExecRequest{Argv: []string{"cat"}, Stdin: "line1\nline2\n"}, api.ExecResult{Stdout: "line1\nline2\n"}},
		{"user by name", api.ExecRequest{Command: "id -u; id -g", User: "nobody"}, api.ExecResult{Stdout: "65534\n65534\n"}},
		{"user by uid:gid", api.ExecRequest{Command: "id -u; id -g", User: "1234:4321"}, api.ExecResult{Stdout: "1234\n4321\n"}},
		{"python3", api.ExecRequest{Argv: []string{"python3", "-c", "import sys; print(6*7); sys.exit(4)"}}, api.ExecResult{ExitCode: 4, Stdout: "42\n"}},
		{"busybox", api.ExecRequest{Argv: []string{"/usr/bin/busybox", "sh", "-c", "echo $((1+2))"}}, api.ExecResult{Stdout: "3\n"}},
		{"signal", api.ExecRequest{Command: "kill -TERM $$"}, api.ExecResult{ExitCode: 143, Signal: "SIGTERM"}},
		// Commands start with no signal ignored or blocked.
		{"clean signal state", api.ExecRequest{Argv: []string{"grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"}},
			api.ExecResult{Stdout: "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.client.Exec(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got.ExitCode != tc.want.ExitCode || got.Stdout != tc.want.Stdout || got.Stderr != tc.want.Stderr || got.Signal != tc.want.Signal || got.TimedOut || got.Truncated {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		// 64 MiB touched and 0.2 s of CPU, in a child the shell waits for.
		burn := "b = bytearray(64 << 20)\nimport time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
		got, err := e.client.Exec(ctx, api.ExecRequest{Argv: []string{"sh", "-c", `python3 -c "$0"; true`, burn}})
		if err != nil || got.ExitCode != 0 {
			t.Fatalf("got %+v, %v", got, err)
		}
		if got.MemoryPeakBytes < 64<<20 || got.MemoryPeakBytes > 1<<30 {
			t.Errorf("memory_peak_bytes %d, want the child's 64 MiB and more", got.MemoryPeakBytes)
		}
		if got.CPUTimeS < 0.2 || got.CPUTimeS > got.DurationS+0.05 {
			t.Errorf("cpu_time_s %.3f, want at least the child's 0.2 s and at most the wall time %.3f", got.CPUTimeS, got.DurationS)
		}
		if d := got.CPUTimeS - got.UserTimeS - got.SysTimeS; d > 1e-6 || d < -1e-6 {
			t.Errorf("cpu_time_s %.6f is not user %.6f + sys %.6f", got.CPUTimeS, got.UserTimeS, got.SysTimeS)
		}
	})
	t.Run("not found", func(t *testing.T) {
		got, err := e.client.Exec(ctx, api.ExecRequest{Argv: []string{"no-such-binary-xyz"}})
		if err != nil || got.ExitCode != 127 || !strings.Contains(got.Stderr, "not found") {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("not executable", func(t *testing.T) {
		got, err := e.client.Exec(ctx, api.ExecRequest{Argv: []string{"/etc/passwd"}})
		if err != nil || got.ExitCode != 126 {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	bad := []struct {
		name string
		req  api.ExecRequest
	}{
		{"empty", api.ExecRequest{}},
		{"both", api.ExecRequest{Argv: []string{"true"}, Command: "true"}},
		{"missing cwd", api.ExecRequest{Argv: []string{"true"}, Cwd: "/no/such/dir"}},
		{"unknown user", api.ExecRequest{Argv: []string{"true"}, User: "no-such-user-xyz"}},
		{"negative timeout", api.ExecRequest{Argv: []string{"true"}, Timeout: -time.Second}},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.name, func(t *testing.T) {
			_, err := e.client.Exec(ctx, tc.req)
			if !client.IsCode(err, api.CodeBadRequest) {
				t.Fatalf("want bad_request, got %v", err)
			}
		})
	}
}

func TestExecutorExecTimeoutKillsProcessGroup(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	res, err := e.client.Exec(ctx, api.ExecRequest{
		Command: "sleep 60 & echo $! > " + pidFile + "; echo started; sleep 60",
		Timeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// As sbx run and sbx exec --timeout: 124, the command stopped
	// (SIGTERM first).
	if !res.TimedOut || res.Signal != "SIGTERM" || res.ExitCode != sbx.ExitTimeout || res.Stdout != "started\n" {
		t.Fatalf("got %+v", res)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	bg, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitGone(t, bg, "background sleep of a timed-out command")
}

// TestExecutorExecReturnsWhileBackgroundJobRuns: a command that leaves a
// job holding its stdout returns when it exits, and the job keeps running.
func TestExecutorExecReturnsWhileBackgroundJobRuns(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	res, err := e.client.Exec(ctx, api.ExecRequest{Command: "sleep 30 & echo $!", Timeout: 20 * time.Second})
	if err != nil || res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("got %+v, %v", res, err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if st := procState(pid); st == "" || st == "Z" {
		t.Fatalf("background job %d is not running (state %q)", pid, st)
	}
	// The orphan now belongs to the executor, which must reap it.
	if pp := procStatField(pid, 4); pp != e.pid() {
		t.Fatalf("orphan %d has parent %d, want the executor %d", pid, pp, e.pid())
	}
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, "killed orphan")
}

func TestExecutorReapsOrphans(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	var pids []int
	for i := 0; i < 20; i++ {
		res, err := e.client.Exec(ctx, api.ExecRequest{Command: "sleep 0.2 >/dev/null 2>&1 & echo $!"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("got %+v, %v", res, err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		waitGone(t, pid, "orphan")
	}
	if z := zombiesOf(e.pid()); len(z) > 0 {
		t.Fatalf("zombie children of the executor: %v", z)
	}
}

func zombiesOf(pid int) []int {
	var out []int
	for _, p := range descendants(pid) {
		if procState(p) == "Z" {
			out = append(out, p)
		}
	}
	return out
}

func TestExecutorExecStream(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	var frames []api.ExecFrame
	res, err := e.client.ExecStream(ctx, api.ExecRequest{Command: "echo one; sleep 0.1; echo two >&2; sleep 0.1; echo three; exit 5"}, func(f api.ExecFrame) error {
		frames = append(frames, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 {
		t.Fatalf("result %+v", res)
	}
	var got []string
	for _, f := range frames {
		got = append(got, f.Type+":"+f.Data)
	}
	if strings.Join(got, "|") != "stdout:one\n|stderr:two\n|stdout:three\n" {
		t.Fatalf("frames %q", got)
	}
	// A bad request in a stream arrives as an error frame.
	_, err = e.client.ExecStream(ctx, api.ExecRequest{Argv: []string{"true"}, Cwd: "/nonexistent"}, func(api.ExecFrame) error { return nil })
	if !client.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("want bad_request, got %v", err)
	}
}

// TestExecutorExecFloodKeepsMemoryBounded prints 100 MB twice,
// captured and streamed; the executor keeps the head and tail and its
// memory stays small.
func TestExecutorExecFloodKeepsMemoryBounded(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	// The bound is on growth: the resident size of the (large, static) binary
	// itself is there before any command runs.
	if _, err := e.client.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	base := vmRSS(t, e.pid())
	res, err := e.client.Exec(ctx, api.ExecRequest{
		Command:        "seq 1 100000; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo the-end",
		MaxOutputBytes: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.HasPrefix(res.Stdout, "1\n2\n3\n") || !strings.HasSuffix(res.Stdout, "xxx\nthe-end\n") || !strings.Contains(res.Stdout, "bytes truncated") {
		t.Fatalf("truncated=%v head=%q tail=%q", res.Truncated, res.Stdout[:min(20, len(res.Stdout))], res.Stdout[max(0, len(res.Stdout)-20):])
	}
	if len(res.Stdout) > 70<<10 {
		t.Fatalf("stdout is %d bytes, over the 64 KiB cap", len(res.Stdout))
	}
	var streamed int64
	_, err = e.client.ExecStream(ctx, api.ExecRequest{Command: "head -c 100000000 /dev/zero"}, func(f api.ExecFrame) error {
		streamed += int64(len(f.Data))
		return nil
	})
	if err != nil || streamed != 100000000 {
		t.Fatalf("streamed %d bytes, %v", streamed, err)
	}
	// The same through a session's terminal.
	sess, err := e.client.CreateSession(ctx, api.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.client.Run(ctx, sess.ID, api.RunRequest{Command: "head -c 50000000 /dev/zero | tr '\\0' y; echo; echo done", TimeoutS: 100, MaxOutputBytes: 8 << 20})
	if err != nil || r.Status != api.StatusCompleted || !r.Truncated || !strings.HasSuffix(r.Output, "yyy\ndone\n") {
		t.Fatalf("session flood: %v %s truncated=%v len=%d", err, r.Status, r.Truncated, len(r.Output))
	}
	rss := vmRSS(t, e.pid())
	t.Logf("executor RSS: %d MiB before the floods, %d MiB after", base>>20, rss>>20)
	if rss-base > 32<<20 {
		t.Fatalf("executor RSS grew by %d MiB during the floods (from %d MiB)", (rss-base)>>20, base>>20)
	}
}

// TestExecutorSurvivesHostileCommands: commands that kill their own process
// group, or fork until the user's process limit, leave the executor
// serving.
func TestExecutorSurvivesHostileCommands(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	res, err := e.client.Exec(ctx, api.ExecRequest{Command: "kill -9 0"})
	if err != nil || res.Signal != "SIGKILL" {
		t.Fatalf("kill -9 0: %+v, %v", res, err)
	}
	// A fork bomb as nobody under RLIMIT_NPROC: forks fail, the timeout
	// kills the group, every bomb process is gone and reaped.
	res, err = e.client.Exec(ctx, api.ExecRequest{
		Argv:    []string{"bash", "-c", "ulimit -u 200; b() { b | b & }; b; sleep 100"},
		User:    "nobody",
		Timeout: 3 * time.Second,
	})
	if err != nil || !res.TimedOut {
		t.Fatalf("fork bomb: %+v, %v", res, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(descendants(e.pid())) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := descendants(e.pid()); len(left) > 0 {
		t.Fatalf("fork bomb processes left: %d", len(left))
	}
	got, err := e.client.Exec(ctx, api.ExecRequest{Argv: []string{"echo", "alive"}})
	if err != nil || got.Stdout != "alive\n" {
		t.Fatalf("after the bomb: %+v, %v", got, err)
	}
}

// TestExecutorGracefulShutdown: SIGTERM reaches running commands and
// sessions first; the executor exits 0 and leaves nothing behind.
func TestExecutorGracefulShutdown(t *testing.T) {
	e := startExecutor(t)
	ctx := harness.Context(t)
	dir := t.TempDir()
	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = e.client.Exec(context.Background(), api.ExecRequest{
			Command: "trap 'echo bye > " + dir + "/exec-term; exit 0' TERM; echo $$ > " + dir + "/exec-pid; sleep 100 & wait",
		})
	}()
	<-started
	s, err := e.client.CreateSession(ctx, api.SessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	r, err := e.client.Run(ctx, s.ID, api.RunRequest{Command: "sleep 100", TimeoutS: 0.2, NoOutputTimeoutS: &zero})
	if err != nil || r.Status != api.StatusRunning {
		t.Fatalf("session run: %+v %v", r, err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dir + "/exec-pid"); err == nil {
			break
		}
	}
	e.stop(t)
	if data, err := os.ReadFile(dir + "/exec-term"); err != nil || string(data) != "bye\n" {
		t.Fatalf("the command did not get SIGTERM before the end: %q %v", data, err)
	}
}
