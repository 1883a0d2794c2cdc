package isolate

import (
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor joins namespaces before the Go runtime starts
	// when the binary is re-executed as a container init.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// init turns any binary that links this package into a libcontainer init
// when libcontainer re-executes it as "<binary> init". It never returns in
// that case. Test binaries get this for free by importing isolate.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
		libcontainer.Init()
	}
}
