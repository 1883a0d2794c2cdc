// Package childexit waits for a child process to exit without holding a
// thread of the Go scheduler in a blocking system call.
//
// os.Process.Wait (and exec.Cmd.Wait, libcontainer's Process.Wait) block
// in waitid(2). A goroutine in a blocking system call keeps its P (one of
// the GOMAXPROCS slots that run goroutines) until the runtime's monitor
// takes it back, and the monitor, when the process was idle, sleeps up to
// 10 ms between looks. A goroutine that reaps a long-lived child (a
// sandbox's PID 1) enters that wait just after the child started: for
// the next few milliseconds a two-CPU host runs the process's goroutines
// on one P, and every goroutine or locked thread that another one wakes
// waits for the running one to block. Exited parks the goroutine in the
// runtime's network poller instead, on a pidfd, which holds no P; the
// wait that follows returns at once.
package childexit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Exited returns once the process pid, a child of the caller that no
// one has reaped yet (so its PID names it until it is), has exited, or
// at once with an error if it cannot wait in the poller (no pidfds, a
// reaped child): the caller's own wait then blocks in the kernel.
func Exited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has exited.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		if err != nil && !errors.Is(err, unix.EINTR) {
			perr = err
			return true
		}
		return n > 0
	})
	return errors.Join(err, perr)
}
