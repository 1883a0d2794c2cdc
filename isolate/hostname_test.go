package isolate

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
	"golang.org/x/sys/unix"
)

// TestSetHostname: the name is set in the process's UTS namespace and
// the host's stays as it was.
func TestSetHostname(t *testing.T) {
	roottest.Require(t, "UTS namespaces")
	host, _ := os.Hostname()
	cmd := exec.Command("unshare", "--uts", "sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	self, _ := os.Readlink("/proc/self/ns/uts")
	for i := 0; i < 1000; i++ {
		if ns, _ := os.Readlink("/proc/" + pid + "/ns/uts"); ns != "" && ns != self {
			break
		}
		_ = unix.Nanosleep(&unix.Timespec{Nsec: 2e6}, nil)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if err := SetHostname(pidfd, "claimed-host"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nsenter", "-t", pid, "-u", "hostname").Output()
	if err != nil || strings.TrimSpace(string(out)) != "claimed-host" {
		t.Fatalf("hostname in the namespace: %q, %v", out, err)
	}
	if now, _ := os.Hostname(); now != host {
		t.Fatalf("the host's hostname changed: %q -> %q", host, now)
	}
	if err := SetHostname(pidfd, strings.Repeat("x", 65)); err == nil {
		t.Fatal("a 65-byte hostname was accepted")
	}
}
