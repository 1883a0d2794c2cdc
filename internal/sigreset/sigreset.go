// Package sigreset clears signal dispositions that a process inherited as
// "ignored" and that the Go runtime leaves alone, so that the commands sbx's
// init and executor start do not inherit them.
package sigreset

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelSigaction is the kernel's struct sigaction for rt_sigaction(2); only
// the handler is read, and an all-zero value means SIG_DFL.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const sigIgn = 1

// IgnoredToDefault sets every signal whose disposition is SIG_IGN back to
// SIG_DFL, except SIGHUP and SIGINT (which the caller handles itself when
// it wants them). Go installs its own handlers for all other signals it
// knows, so the ones left ignored are those the runtime does not touch
// (such as glibc's real-time signals 32 and 33), which exec would
// otherwise pass on as ignored.
func IgnoredToDefault() {
	for sig := 1; sig <= 64; sig++ {
		switch unix.Signal(sig) {
		case unix.SIGKILL, unix.SIGSTOP, unix.SIGHUP, unix.SIGINT:
			continue
		}
		var old kernelSigaction
		if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
			continue
		}
		if old.handler != sigIgn {
			continue
		}
		var dfl kernelSigaction
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
}
