// Package procguard protects sbx's own processes inside a sandbox (the
// one-shot init and the executor, both PID 1) from the code they run: it
// makes them impossible to ptrace or to read through /proc for the
// sandbox's processes, and keeps the descriptors they inherited from the
// host out of every command they start.
package procguard

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Apply makes the calling process non-dumpable and marks every descriptor
// from 3 up close-on-exec. It must run first thing, before any command is
// started.
//
// Non-dumpable (as runc makes its init): ptrace, /proc/PID/mem, fd, environ,
// maps and the like then need CAP_SYS_PTRACE, which a sandbox does not
// have by default, so root inside the sandbox can neither attach to nor
// rewrite sbx's process. The kernel resets the flag at execve, so the
// commands started are ordinary processes.
//
// Close-on-exec: the host hands PID 1 its pipes and sockets as plain
// inherited descriptors (status, lifeline, seccomp program, listener,
// environment); without the flag every command would inherit them and
// could write the status the host reads or fill its pipe.
func Apply() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return CloexecFrom(3)
}

// CloexecFrom sets close-on-exec on every open descriptor >= first.
func CloexecFrom(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if err != unix.ENOSYS && err != unix.EINVAL {
		return fmt.Errorf("close_range: %w", err)
	}
	// Kernels before 5.11: one fcntl per open descriptor.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("set close-on-exec on fd %d: %w", fd, err)
		}
	}
	return nil
}
