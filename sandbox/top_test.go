package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/sbxrun/sbx/internal/roottest"
)

// TestProcessInfoMatchesProcfs reads processes in a PID namespace of
// their own (as in a sandbox) and checks what processInfo reports against
// the procfs library's reading of the same files: the inner PID and
// parent, state, CPU time, RSS, UID and command line, also for a command
// name holding ") " that would shift naively split fields.
func TestProcessInfoMatchesProcfs(t *testing.T) {
	roottest.Require(t, "it makes a PID namespace")
	odd := filepath.Join(t.TempDir(), "x) R 1 2")
	data, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// unshare (host side) -> sh (PID 1 inside) -> the odd sleep (PID 2+).
	cmd := exec.Command("unshare", "--pid", "--fork", "sh", "-c", `"$0" 7201 & wait`, odd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var shPID, sleepPID int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && sleepPID == 0; time.Sleep(10 * time.Millisecond) {
		shPID, sleepPID = childOf(t, cmd.Process.Pid), 0
		if shPID != 0 {
			sleepPID = childOf(t, shPID)
		}
	}
	if sleepPID == 0 {
		t.Fatal("the namespaced sleep did not start")
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pid, innerPID, innerPPID int
		command                  string
	}{
		{shPID, 1, 0, "sh -c \"$0\" 7201 & wait " + odd},
		{sleepPID, 2, 1, odd + " 7201"},
	} {
		got, ok := processInfo("/proc", c.pid)
		if !ok {
			t.Fatalf("pid %d: not read", c.pid)
		}
		p, _ := fs.Proc(c.pid)
		st, err1 := p.Stat()
		status, err2 := p.NewStatus()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got.PID != c.innerPID || got.HostPID != c.pid || got.PPID != c.innerPPID || got.Command != c.command ||
			got.State != st.State || got.CPUTimeS != st.CPUTime() || got.RSSBytes != int64(st.ResidentMemory()) ||
			got.UID != int(status.UIDs[0]) {
			t.Errorf("pid %d: got %+v; procfs: state %s cpu %v rss %d uid %d; want inner pid %d ppid %d command %q",
				c.pid, got, st.State, st.CPUTime(), st.ResidentMemory(), status.UIDs[0], c.innerPID, c.innerPPID, c.command)
		}
	}
	if _, ok := processInfo("/proc", 1<<30); ok {
		t.Error("a pid that does not exist was read")
	}
}

// childOf returns a child of pid from /proc, 0 when it has none yet.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}
