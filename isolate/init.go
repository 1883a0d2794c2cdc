package isolate

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor joins namespaces before the Go runtime starts
	// when the binary is re-executed as a container init.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// initCalled records that this program called Init, so that Start can
// refuse to run when it did not.
var initCalled atomic.Bool

// Init must be the first call in the main function (or TestMain) of every
// program that starts sandboxes: libcontainer re-executes the program's own
// binary as "PROGRAM init" to set each sandbox up, and in that process Init
// becomes libcontainer's init and never returns. In every other process it
// returns at once. runc does the same at the top of its main.
//
// It also keeps the main goroutine on the main thread: libcontainer joins
// container namespaces on locked threads that die with their goroutine,
// and a main thread wedged in a container's mount namespace would make
// /proc/self (the mount table above all) show the container's view.
//
//	func main() {
//		isolate.Init()
//		...
//	}
func Init() {
	runtime.LockOSThread()
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
		libcontainer.Init() // never returns
	}
	initCalled.Store(true)
}

// ErrNoInit is returned by Start when the program never called Init: its
// re-executed copy would otherwise run the program's main inside the
// sandbox instead of setting the sandbox up.
var ErrNoInit = errors.New("this program did not call sandbox.Init() (isolate.Init()) first in main (or in TestMain): " +
	"libcontainer re-executes the program to set each sandbox up, and Init is what takes over then; " +
	"add it as the first line of main (see docs/embedding.md)")

// CheckInit returns ErrNoInit unless the program called Init.
func CheckInit() error {
	if !initCalled.Load() {
		return ErrNoInit
	}
	return nil
}
