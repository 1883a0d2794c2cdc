package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
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
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(data), "\n") {
			pre, post, ok := strings.Cut(line, " - ")
			if !ok {
				continue
			}
			f, pf := strings.Fields(pre), strings.Fields(post)
			if len(f) < 5 || len(pf) < 1 || (pf[0] != "cgroup" && pf[0] != "cgroup2") {
				continue
			}
			mp := unescapeMountinfo(f[4])
			if mp == Root || strings.HasPrefix(mp, Root+"/") {
				mountpoints = append(mountpoints, mp)
			}
		}
	})
	return mountpoints
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			n := 0
			okDigits := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					okDigits = false
					break
				}
				n = n*8 + int(c-'0')
			}
			if okDigits {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
