package executor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sbxBinary returns the sbx binary under test (see TestMain).
func sbxBinary(t testing.TB) string {
	t.Helper()
	if harness.SbxBin == "" {
		t.Fatal("no sbx binary: TestMain did not run")
	}
	return harness.SbxBin
}

// executorBinary returns the sbx-executor that sandboxes run, installed
// from this test binary's embedded copy.
func executorBinary(t testing.TB) string {
	t.Helper()
	p, err := helperbin.Install(harness.HelpersDir, helperbin.Executor)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runningExecutor is an executor started as a plain process.
type runningExecutor struct {
	cmd    *exec.Cmd
	client *client.Client
	socket string
	done   chan error
	stderr *lockedWriter
}

// pid is the executor's process id.
func (e *runningExecutor) pid() int { return e.cmd.Process.Pid }

// startExecutor runs `sbx executor` on a listening socket passed as fd 3
// (as a sandbox does) with the default PATH and extra flags. Cleanup stops
// it with SIGTERM and checks that it exited cleanly and left no process.
func startExecutor(t testing.TB, flags ...string) *runningExecutor {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "executor.sock")
	lf, err := client.ListenFile(sock)
	if err != nil {
		t.Fatal(err)
	}
	args := append(client.Args(executorBinary(t), "", []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ""),
		append([]string{"--log-level", "debug", "--stop-timeout", "2s"}, flags...)...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.ExtraFiles = []*os.File{lf}
	var stderr strings.Builder
	lw := &lockedWriter{w: &stderr}
	cmd.Stderr = lw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start executor: %v", err)
	}
	lf.Close()
	e := &runningExecutor{cmd: cmd, socket: sock, done: make(chan error, 1), stderr: lw}
	go func() { e.done <- cmd.Wait() }()
	e.client = client.New(sock, client.Options{Timeout: 30 * time.Second})
	t.Cleanup(func() {
		e.client.Close()
		if e.cmd.ProcessState == nil {
			e.stop(t)
		}
	})
	return e
}

// stop sends SIGTERM and waits for a clean exit and no leftover children.
func (e *runningExecutor) stop(t testing.TB) {
	t.Helper()
	pid := e.pid()
	// Make sure it is serving (its signal handlers are in place).
	hctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, _ = e.client.Health(hctx)
	cancel()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.done:
		if err != nil {
			t.Errorf("executor exited with %v; stderr:\n%s", err, e.stderr)
		}
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		t.Errorf("executor did not exit within 30s of SIGTERM")
		<-e.done
	}
	if left := descendants(pid); len(left) > 0 {
		t.Errorf("processes left behind by the executor: %v", left)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// descendants lists the processes whose parent chain leads to pid.
func descendants(pid int) []int {
	parents := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := procStatField(p, 4); pp > 0 {
			parents[p] = pp
		}
	}
	var out []int
	for p := range parents {
		for q, n := parents[p], 0; q > 0 && n < 64; q, n = parents[q], n+1 {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// procStatField reads numeric field n of /proc/PID/stat, or -1.
func procStatField(pid, n int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < n-2 {
		return -1
	}
	v, err := strconv.Atoi(f[n-3])
	if err != nil {
		return -1
	}
	return v
}

// procState is the state letter of a process ("Z" for a zombie), or ""
// when it is gone.
func procState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitGone waits (bounded) until pid no longer exists, not even as a
// zombie, and fails the test otherwise.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if procState(pid) == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s (pid %d) still exists in state %q", what, pid, procState(pid))
}

// vmRSS is the resident memory of pid in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n * 1024
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}
