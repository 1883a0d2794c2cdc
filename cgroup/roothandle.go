package cgroup

import (
	"sync"

	ocg "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

var rootHandleOnce sync.Once

// OpenRootHandle makes the cgroup library open the handle on Root that it
// keeps for the life of the process, from the calling goroutine, which
// must run in the host's mount namespace. Callers that start containers
// from a thread in another mount namespace (a sandbox's own) call it
// first: a handle opened there would resolve cgroup paths through that
// namespace's copies of the cgroup mounts, which go with the namespace.
func OpenRootHandle() {
	rootHandleOnce.Do(func() {
		if f, err := ocg.OpenFile(Root, ".", unix.O_PATH|unix.O_DIRECTORY); err == nil {
			f.Close()
		}
	})
}
