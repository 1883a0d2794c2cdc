package sigreset

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
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

// ignore sets sig's disposition to SIG_IGN until the test ends.
func ignore(t *testing.T, sig unix.Signal) {
	t.Helper()
	ign := kernelSigaction{handler: sigIgn}
	var old kernelSigaction
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&ign)), uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	t.Cleanup(func() {
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	})
}

// ignoredMask is this process's SigIgn from /proc/self/status.
func ignoredMask(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:\t"); ok {
			m, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatal("no SigIgn in /proc/self/status")
	return 0
}

func bit(sig unix.Signal) uint64 { return 1 << (uint(sig) - 1) }

// TestIgnoredToDefault: signal 32 ignored (as some supervisors leave it)
// is inherited by the child, which resets it; its own child must not see
// it ignored. SIGHUP and SIGINT stay as they were (the caller's choice:
// under nohup SIGHUP stays ignored), whatever the test itself runs under.
func TestIgnoredToDefault(t *testing.T) {
	ignore(t, 32)
	// The child starts with SIGHUP ignored, as under nohup (Go resets the
	// signals it handles itself at exec, so the shell sets it).
	keep := bit(unix.SIGHUP) | ignoredMask(t)&bit(unix.SIGINT)
	cmd := exec.Command("sh", "-c", `trap "" HUP; exec "$0" -test.run='^$'`, os.Args[0])
	cmd.Env = append(os.Environ(), "SIGRESET_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("SigIgn:\t%016x", keep); got != want {
		t.Errorf("grandchild inherits %q, want %q (only SIGHUP and SIGINT kept)", got, want)
	}
}
