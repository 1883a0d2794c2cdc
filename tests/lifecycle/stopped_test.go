package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// After kill -9 of its PID 1 a sandbox shows as stopped in ps and
// inspect, and exec and cp fail with exit 1 and a message that says what
// happened and what to do, not a raw "connection refused".
func TestLifecycleDeadPid1(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t)
	pid := h.Inspect(t, id).Pid
	if pid <= 0 {
		t.Fatal("inspect shows no PID")
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); os.IsNotExist(err) {
			break
		}
		if i == 500 {
			t.Fatalf("pid %d still there 5s after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var list []sbx.Sandbox
	if err := json.Unmarshal([]byte(h.Must(t, "ps", "-a", "--format", "json")), &list); err != nil || len(list) != 1 {
		t.Fatalf("ps --format json: %v %v", list, err)
	}
	if list[0].Status != sbx.StatusStopped {
		t.Fatalf("ps shows %s after kill -9 of PID 1, want stopped", list[0].Status)
	}
	if sb := h.Inspect(t, id); sb.Status != sbx.StatusStopped {
		t.Fatalf("inspect shows %s, want stopped", sb.Status)
	}
	const want = "is stopped: its PID 1 exited; sbx start or sbx rm it"
	for _, args := range [][]string{{"exec", id, "--", "true"}, {"cp", id + ":/etc/hostname", t.TempDir()}} {
		r := h.Sbx(t, "", args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "connection refused") {
			t.Fatalf("sbx %s on a dead sandbox: exit %d %q; want 1 and %q", args[0], r.Code, r.Stderr, want)
		}
	}
	h.Must(t, "rm", id)
}
