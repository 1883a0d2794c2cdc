package isolate

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// SetHostname sets the hostname in the UTS namespace of the process the
// pidfd refers to (a running sandbox's PID 1), from the host: a locked
// OS thread joins that namespace, sets the name and goes back to its
// own. Nothing inside the sandbox takes part. A thread that cannot go
// back is never reused (its goroutine ends locked).
func SetHostname(pidfd int, name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("hostname %q: want 1 to 64 bytes", name)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's UTS namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(pidfd, unix.CLONE_NEWUTS); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("join the sandbox's UTS namespace: %w", err)
			return
		}
		serr := unix.Sethostname([]byte(name))
		if err := unix.Setns(self, unix.CLONE_NEWUTS); err != nil {
			errc <- errors.Join(serr, fmt.Errorf("return to the host's UTS namespace: %w", err))
			return // the thread stays locked and ends with this goroutine
		}
		runtime.UnlockOSThread()
		if serr != nil {
			serr = fmt.Errorf("sethostname: %w", serr)
		}
		errc <- serr
	}()
	return <-errc
}
