package cgroup

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/moby/sys/mountinfo"
	ocg "github.com/opencontainers/cgroups"
)

// WarmAttach starts, in the background, a move of this process into the
// cgroup it is already in, in one hierarchy: it changes nothing, but it
// takes the kernel's cgroup_threadgroup_rwsem for writing, as every move
// does. The first writer after a pause waits for an RCU grace period (4-18
// ms on the development machines) and later writers within about one
// period do not: a start that calls WarmAttach before its other set-up
// work overlaps that wait with the work, instead of paying it when
// libcontainer moves the sandbox's init into its cgroups. The waiting
// thread uses no CPU. Errors are ignored: without the move the start
// only waits as it did.
func WarmAttach() { go warmAttach() }

// warmAttach is WarmAttach's move, made by the calling goroutine.
func warmAttach() {
	if path := ownProcsFile(); path != "" {
		_ = os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0)
	}
}

// ownProcsFile is the cgroup.procs file of this process's own cgroup: in
// the pids hierarchy on v1 and hybrid hosts, found as libcontainer finds
// it (mountinfo's root of the mount taken into account, for a process in
// a container), or in the unified hierarchy on v2 hosts; "" when there is
// none.
func ownProcsFile() string {
	if ocg.IsCgroup2UnifiedMode() {
		// The path in /proc/self/cgroup is below the mount's own root
		// only when that is the hierarchy's root (or the cgroup
		// namespace's), not a bind of a subtree.
		mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(Root))
		if err != nil || len(mounts) != 1 || mounts[0].Root != "/" {
			return ""
		}
		own, err := ocg.ParseCgroupFile("/proc/self/cgroup")
		if err != nil || own[""] == "" {
			return ""
		}
		return filepath.Join(Root, own[""], "cgroup.procs")
	}
	dir, err := ocg.GetOwnCgroupPath("pids")
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "cgroup.procs")
}
