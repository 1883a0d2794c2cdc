package isolate

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// onThreadOfItsOwn runs fn, which may unshare a namespace, on a thread
// locked to it and never unlocked, so that the thread, and the namespace
// with it, ends with the test. It is never the process's main thread: Go
// cannot end that one, which would stay in the namespace, and a later
// test's /proc/self view would be the namespace's, not the host's. On
// the main thread, fn runs in a subtest while the main thread stays
// locked to this test's goroutine.
func onThreadOfItsOwn(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		fn(t)
		return
	}
	defer runtime.UnlockOSThread()
	t.Run("thread", func(t *testing.T) {
		runtime.LockOSThread()
		fn(t)
	})
}
