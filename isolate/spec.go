package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/capability"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sbxrun/sbx/cgroup"
)

// Network modes for Spec.Network.
const (
	NetworkNone = "none" // a private network namespace with only lo, up
	NetworkHost = "host" // the host's network namespace
)

// InitPath is where the small sbx-init binary is bind-mounted, read-only,
// in one-shot sandboxes, which run it as their PID 1 ("sbx-init reaper").
const InitPath = "/.sbx/init"

// ExecutorPath is where the sbx-executor binary is bind-mounted, read-only,
// in long-lived sandboxes, which run it as their PID 1 ("executor").
const ExecutorPath = "/.sbx/executor"

// Spec describes one sandboxed process tree. Policy is decided by the
// caller; isolate only turns the spec into a libcontainer configuration.
type Spec struct {
	ID             string   // unique container ID (also the cgroup name)
	Rootfs         string   // prepared root directory, e.g. an overlay mount
	ReadonlyRootfs bool     // mount the root read-only
	Args           []string // the process to run as PID 1
	Env            []string // KEY=VALUE
	Cwd            string   // working directory inside the root; "/" when empty
	UID, GID       uint32
	AdditionalGIDs []uint32
	Hostname       string
	CapAdd         []string // added to Docker's default set; "ALL" adds all
	CapDrop        []string // removed from the set; "ALL" removes all
	Seccomp        string   // "default", "unconfined" or a profile file; resolved by the caller
	SeccompProfile *specs.LinuxSeccomp
	Limits         cgroup.Limits
	// Rlimits are set on PID 1 before it runs (inherited by every
	// process): OCI names (RLIMIT_NOFILE), RLIM_INFINITY for unlimited.
	Rlimits []specs.POSIXRlimit
	// ShmBytes sizes /dev/shm (0: 64 MiB).
	ShmBytes    int64
	Network     string // NetworkNone, NetworkHost, or the path of a network namespace to join
	Mounts      []specs.Mount
	MaskedPaths []string // in addition to Docker's
	// CgroupView, if set, is a directory MountCgroupView made for this
	// sandbox in the mount namespace it is started from: /sys/fs/cgroup is
	// then one bind of it instead of a tmpfs and one bind per hierarchy.
	CgroupView string
	// Dev, if set, is a /dev MountDev made for this sandbox in the mount
	// namespace it is started from: /dev is then one bind of it, and
	// libcontainer makes no device nodes or symlinks.
	Dev string
	Tty bool
	// HelperSeccomp installs the seccomp filter from sbx's own init instead
	// of libcontainer's: the filter is compiled once, cached, and handed to
	// the helper (Args[0] must be InitPath or ExecutorPath, Args[1] its
	// subcommand) as "--seccomp-fd N" after the subcommand; the helper
	// loads it before any sandboxed code runs.
	HelperSeccomp bool
	// ParentDeathSignal is sent to the sandbox's PID 1 when the creating
	// thread dies; one-shot runs use SIGKILL so nothing outlives sbx.
	ParentDeathSignal int
	// UserNS, if set, runs the sandbox in that user namespace; its root
	// (Rootfs, Mounts) must show files with the namespace's ids (idmapped
	// mounts, see rootfs.Options.UserNS).
	UserNS *UserNS
}

// DefaultCapabilities is Docker's default capability set.
var DefaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// DefaultMaskedPaths are Docker's masked paths: files get /dev/null bound
// over them, directories an empty read-only tmpfs.
var DefaultMaskedPaths = []string{
	"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
}

// DefaultReadonlyPaths are Docker's read-only paths.
var DefaultReadonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// DefaultPath is the PATH given to processes whose environment has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Capabilities returns Docker's default set adjusted by add and drop, in
// the CAP_X form, or an error naming an unknown capability.
func Capabilities(add, drop []string) ([]string, error) {
	known := map[string]bool{}
	var all []string
	for _, c := range capability.ListKnown() {
		name := "CAP_" + strings.ToUpper(c.String())
		known[name] = true
		all = append(all, name)
	}
	norm := func(list []string) ([]string, bool, error) {
		var out []string
		hasAll := false
		for _, c := range list {
			c = strings.ToUpper(strings.TrimSpace(c))
			if c == "ALL" {
				hasAll = true
				continue
			}
			if !strings.HasPrefix(c, "CAP_") {
				c = "CAP_" + c
			}
			if !known[c] {
				return nil, false, fmt.Errorf("unknown capability %q", c)
			}
			out = append(out, c)
		}
		return out, hasAll, nil
	}
	addList, addAll, err := norm(add)
	if err != nil {
		return nil, err
	}
	dropList, dropAll, err := norm(drop)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	if !dropAll {
		for _, c := range DefaultCapabilities {
			set[c] = true
		}
	}
	if addAll {
		for _, c := range all {
			set[c] = true
		}
	}
	for _, c := range addList {
		set[c] = true
	}
	for _, c := range dropList {
		delete(set, c)
	}
	var out []string
	for _, c := range all { // stable, kernel order
		if set[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// oci turns the spec into an OCI runtime spec for libcontainer's converter.
// A portable spec mounts /sys/fs/cgroup the standard way (a cgroup mount)
// for other runtimes; sbx's own binds the sandbox's cgroup directories.
func (s *Spec) oci(portable bool) (*specs.Spec, error) {
	if s.ID == "" || s.Rootfs == "" || len(s.Args) == 0 {
		return nil, errors.New("isolate: spec needs an ID, a root filesystem and a command")
	}
	if err := s.Limits.Validate(); err != nil {
		return nil, err
	}
	caps, err := Capabilities(s.CapAdd, s.CapDrop)
	if err != nil {
		return nil, err
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = "/"
	}
	if !filepath.IsAbs(cwd) {
		return nil, fmt.Errorf("working directory %q must be absolute", cwd)
	}
	spec := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: s.Rootfs, Readonly: s.ReadonlyRootfs},
		Hostname: s.Hostname,
		Process: &specs.Process{
			Terminal:        s.Tty,
			Args:            s.Args,
			Env:             s.Env,
			Cwd:             cwd,
			User:            specs.User{UID: s.UID, GID: s.GID, AdditionalGids: s.AdditionalGIDs},
			Rlimits:         s.Rlimits,
			NoNewPrivileges: true,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
		},
		Mounts: append(append(s.kernelMounts(portable), s.cgroupMounts(portable, cgroup.Mountpoints())...), s.Mounts...),
		Linux: &specs.Linux{
			CgroupsPath:   cgroup.SandboxPath(s.ID),
			Resources:     s.Limits.OCIResources(),
			MaskedPaths:   append(append([]string{}, DefaultMaskedPaths...), s.MaskedPaths...),
			ReadonlyPaths: append([]string{}, DefaultReadonlyPaths...),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
			},
		},
	}
	switch s.Network {
	case "", NetworkNone:
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	case NetworkHost:
	default:
		if _, err := os.Stat(s.Network); err != nil {
			return nil, fmt.Errorf("network namespace %s: %w", s.Network, err)
		}
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.Network})
	}
	if s.SeccompProfile != nil {
		spec.Linux.Seccomp = s.SeccompProfile
	}
	return spec, nil
}

// kernelMounts are defaultMounts, adjusted for a user namespace and, in
// sbx's own (not portable) spec, with a prepared /dev.
func (s *Spec) kernelMounts(portable bool) []specs.Mount {
	m := defaultMounts(s.ReadonlyRootfs)
	if s.ShmBytes > 0 {
		for i := range m {
			if m[i].Destination == "/dev/shm" {
				m[i].Options = append(m[i].Options[:len(m[i].Options)-1:len(m[i].Options)-1], fmt.Sprintf("size=%dk", (s.ShmBytes+1023)/1024))
			}
		}
	}
	if s.Dev != "" && !portable {
		for i := range m {
			if m[i].Destination == "/dev" {
				m[i] = specs.Mount{Destination: "/dev", Type: "bind", Source: s.Dev, Options: []string{"bind", "nosuid", "strictatime"}}
			}
		}
	}
	if s.UserNS != nil {
		m = userNSMounts(m, s.Network)
	}
	return m
}

// viewedControllers are the v1 hierarchies a sandbox sees at
// /sys/fs/cgroup: those that hold its limits and usage (what runtimes,
// JVMs and the executor read). The others (blkio, devices, freezer,
// name=systemd, net_cls, perf_event, the controller-less unified
// hierarchy of hybrid hosts...) still apply to the sandbox (libcontainer
// joins every hierarchy; the devices cgroup still denies device access)
// but are not shown: each bind costs libcontainer 1.5's init about 90
// syscalls of path checks (docs/bench.md, "How the time was found").
var viewedControllers = map[string]bool{"cpu": true, "cpuacct": true, "cpuset": true, "memory": true, "pids": true}

// viewed reports whether the v1 hierarchy mounted at mp holds one of
// viewedControllers ("cpu,cpuacct" where they are mounted together).
func viewed(mp string) bool {
	for _, c := range strings.Split(filepath.Base(mp), ",") {
		if viewedControllers[c] {
			return true
		}
	}
	return false
}

// cgroupMounts show the sandbox its own cgroups at /sys/fs/cgroup, read-only,
// given the host's cgroup mountpoints mps: on a pure v2 host one bind of
// its directory; on v1 and hybrid hosts, with a CgroupView, one recursive
// bind of that view, else a tmpfs with a bind of the sandbox's directory
// in each viewed hierarchy (which exist once libcontainer has applied the
// cgroup, before the root is set up), remounted read-only in place once
// the binds are made (a read-only path there would bind the whole view
// again). Binds cost microseconds where mounting each v1 hierarchy anew
// costs about a millisecond apiece; with the cgroup namespace,
// /proc/self/cgroup still shows "/".
func (s *Spec) cgroupMounts(portable bool, mps []string) []specs.Mount {
	if portable {
		return []specs.Mount{{Destination: cgroup.Root, Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}}}
	}
	bind := []string{"rbind", "ro", "nosuid", "nodev", "noexec"}
	if pureV2(mps) {
		return []specs.Mount{{Destination: cgroup.Root, Type: "bind", Source: filepath.Join(cgroup.Root, cgroup.SandboxPath(s.ID)), Options: bind}}
	}
	if s.CgroupView != "" {
		return []specs.Mount{{Destination: cgroup.Root, Type: "bind", Source: s.CgroupView, Options: bind}}
	}
	m := []specs.Mount{{Destination: cgroup.Root, Type: "tmpfs", Source: "tmpfs",
		Options: []string{"ro", "nosuid", "nodev", "noexec", "mode=755", "size=4k", "nr_inodes=64"}}}
	for _, mp := range mps {
		if !viewed(mp) {
			continue
		}
		m = append(m, specs.Mount{Destination: mp, Type: "bind", Source: filepath.Join(mp, cgroup.SandboxPath(s.ID)), Options: bind})
	}
	sort.Slice(m[1:], func(i, j int) bool { return m[1+i].Destination < m[1+j].Destination })
	return m
}

// defaultMounts are the kernel filesystems of every sandbox, as Docker
// mounts them: fresh /proc, a small /dev tmpfs with devpts, shm and mqueue,
// read-only /sys and cgroup.
func defaultMounts(readonly bool) []specs.Mount {
	tmpOpts := []string{"nosuid", "nodev", "mode=1777", "size=65536k"}
	m := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	if readonly {
		m = append(m, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: tmpOpts})
	}
	return m
}
