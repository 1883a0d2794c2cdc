package isolate

import (
	"os"
	"runtime"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor joins namespaces before the Go runtime starts
	// when the binary is re-executed as a container init.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// init turns any binary that links this package into a libcontainer init
// when libcontainer re-executes it as "<binary> init". It never returns in
// that case. Test binaries get this for free by importing isolate.
//
// It also keeps the main goroutine on the main thread: libcontainer joins
// container namespaces on locked threads that die with their goroutine,
// and a main thread wedged in a container's mount namespace would make
// /proc/self (the mount table above all) show the container's view.
func init() {
	runtime.LockOSThread()
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
		libcontainer.Init()
	}
}
