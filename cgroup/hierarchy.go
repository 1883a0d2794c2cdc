package cgroup

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
)

var (
	mountpointsOnce sync.Once
	mountpoints     []string
)

// Mountpoints lists where the host's cgroup hierarchies are mounted below
// Root (one per v1 hierarchy and the unified one), or Root alone on a pure
// v2 host. It is read once per process.
func Mountpoints() []string {
	mountpointsOnce.Do(func() {
		mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
		if err != nil {
			return
		}
		for _, m := range mounts {
			if m.Mountpoint == Root || strings.HasPrefix(m.Mountpoint, Root+"/") {
				mountpoints = append(mountpoints, m.Mountpoint)
			}
		}
	})
	return mountpoints
}

// SandboxDirs maps each cgroup mountpoint to the directory of sandbox id
// in that hierarchy, e.g. /sys/fs/cgroup/memory -> /sys/fs/cgroup/memory/sbx/id.
func SandboxDirs(id string) map[string]string {
	out := map[string]string{}
	for _, mp := range Mountpoints() {
		out[mp] = filepath.Join(mp, SandboxPath(id))
	}
	return out
}
