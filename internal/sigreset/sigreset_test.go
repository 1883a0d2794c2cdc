package sigreset

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain lets the test binary report the ignored signals its children
// inherit after IgnoredToDefault.
func TestMain(m *testing.M) {
	if os.Getenv("SIGRESET_CHILD") == "1" {
		IgnoredToDefault()
		out, _ := exec.Command("grep", "^SigIgn", "/proc/self/status").Output()
		os.Stdout.Write(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestIgnoredToDefault(t *testing.T) {
	// Ignore signal 32 in this process, as some supervisors do; the child
	// inherits it, resets it, and its own child must not see it ignored.
	ign := kernelSigaction{handler: sigIgn}
	var old kernelSigaction
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, 32, uintptr(unsafe.Pointer(&ign)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	defer unix.RawSyscall6(unix.SYS_RT_SIGACTION, 32, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SIGRESET_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "SigIgn:\t0000000000000000" {
		t.Errorf("grandchild inherits %q", got)
	}
}
