package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/version"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/seccomp"
)

// Info reports what this host offers and what sbx uses here.
func (h *Host) Info(ctx context.Context) (*sbx.HostInfo, error) {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	info := &sbx.HostInfo{
		Version:    version.Version + " (" + version.Commit + ")",
		Kernel:     unix.ByteSliceToString(uts.Release[:]),
		CgroupMode: string(cgroup.DetectMode()),
		Root:       h.store.Root(),
		RunRoot:    h.store.RunRoot(),
	}
	info.CgroupControllers, _ = cgroup.Controllers()
	info.CgroupParent = "/" + cgroup.Parent()
	info.SwapLimit = cgroup.SwapControllable()
	info.Seccomp, info.LibseccompVersion = seccomp.Supported()
	info.Overlayfs = filesystemSupported("overlay")
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		info.UserNamespaces = strings.TrimSpace(string(data)) != "0"
	}
	info.Uses = []string{
		"namespaces: mount, pid, ipc, uts, net (lo only), cgroup",
		"cgroup " + info.CgroupMode + " limits for memory (swap off), cpu, pids under /" + cgroup.DefaultParent,
		"capabilities: " + strings.Join(isolate.DefaultCapabilities, ","),
		"no_new_privs, Docker's masked and read-only paths, device allow-list",
	}
	if info.Seccomp {
		info.Uses = append(info.Uses, "seccomp: Docker's default profile (precompiled, loaded by sbx's init)")
	} else {
		info.Warnings = append(info.Warnings, "this binary has no seccomp support: rebuild with -tags seccomp")
	}
	if info.Overlayfs {
		info.Uses = append(info.Uses, "root: overlayfs over read-only layers, writable layer on a size-capped tmpfs")
	} else {
		info.Warnings = append(info.Warnings, "overlayfs is not available: load the overlay module")
	}
	info.Checkpoints = h.checkpointSupport(ctx)
	if !info.SwapLimit {
		info.Warnings = append(info.Warnings, "swap accounting is off: memory limits cannot disable swap (boot with swapaccount=1)")
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil {
		info.Uses = append(info.Uses, fmt.Sprintf("rlimits: inherited (nofile %d/%d)", rl.Cur, rl.Max))
	}
	if os.Geteuid() != 0 {
		info.Warnings = append(info.Warnings, "not running as root: creating sandboxes needs root (namespaces, cgroups, mounts, network devices); run sbx as root or use an sbx server (--host)")
	}
	if !hasCapability(unix.CAP_SYS_RESOURCE) {
		info.Warnings = append(info.Warnings, "no CAP_SYS_RESOURCE: rlimits cannot be raised above the current hard limits and oom_score_adj cannot be lowered")
	}
	return info, nil
}

func filesystemSupported(name string) bool {
	data, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == name {
			return true
		}
	}
	return false
}

// hasCapability reports whether this process's bounding set holds
// capability c.
func hasCapability(c int) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			var mask uint64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%x", &mask)
			return mask&(1<<uint(c)) != 0
		}
	}
	return false
}
