package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/capabilities"
	"github.com/opencontainers/runc/libcontainer/configs"
	lcseccomp "github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/seccomp"
)

// This file runs containers from OCI bundles as other runtimes hand them
// over (containerd's runc shim through sbx-runc): a config.json in, a
// libcontainer container out, with the container's lifecycle split over
// separate processes the way runc splits it (create leaves the init waiting,
// start releases it, exec joins it).

// ErrNotRunning is libcontainer's error for a container that is not running
// ("container not running", a text containerd's shim matches).
var ErrNotRunning = libcontainer.ErrNotRunning

// ErrPrivileged is returned by Harden for a spec that asks for every
// device, as privileged Kubernetes pods do: sbx does not run those.
var ErrPrivileged = errors.New("sbx does not run privileged containers (the spec allows every device); " +
	"run this pod with another RuntimeClass or without privileged: true")

// Harden adds sbx's protections to an OCI spec where the spec leaves room,
// so that a container runs at least as confined as an sbx sandbox:
// Docker's masked and read-only paths are added to the spec's own,
// no_new_privs is set, the built-in seccomp profile applies when the spec
// names none, and the device cgroup (see OCIOptions) is an allow-list.
// It returns ErrPrivileged for a spec that allows every device.
func Harden(spec *specs.Spec) error {
	if spec.Process == nil || spec.Linux == nil {
		return errors.New("config.json has no process or no linux section")
	}
	if spec.Linux.Resources != nil {
		for _, d := range spec.Linux.Resources.Devices {
			if d.Allow && (d.Type == "" || d.Type == "a") && d.Major == nil && d.Minor == nil {
				return ErrPrivileged
			}
		}
	}
	for _, p := range DefaultMaskedPaths {
		if !slices.Contains(spec.Linux.MaskedPaths, p) {
			spec.Linux.MaskedPaths = append(spec.Linux.MaskedPaths, p)
		}
	}
	for _, p := range DefaultReadonlyPaths {
		if !slices.Contains(spec.Linux.ReadonlyPaths, p) {
			spec.Linux.ReadonlyPaths = append(spec.Linux.ReadonlyPaths, p)
		}
	}
	spec.Process.NoNewPrivileges = true
	if spec.Linux.Seccomp == nil {
		sc, err := seccomp.Resolve(seccomp.Default, spec)
		if err != nil {
			return err
		}
		spec.Linux.Seccomp = sc
	}
	return nil
}

// OCIOptions are runc's create flags that shape the container.
type OCIOptions struct {
	NoPivotRoot  bool // keep the old root with a chroot-like move (ramdisk roots)
	NoNewKeyring bool // keep the caller's session keyring
}

// CreateOCI creates, under stateRoot, the container id from an OCI spec (as
// given, apart from its device rules: see below), without starting it. The
// caller's working directory must be the bundle: a relative root path is
// taken from it and it is recorded as the bundle. The device cgroup allows
// sbx's list plus the device nodes the spec creates (linux.devices, e.g.
// from a device plugin), never runc's blanket mknod.
func CreateOCI(stateRoot, id string, spec *specs.Spec, opts OCIOptions) (*Container, error) {
	if err := CheckInit(); err != nil {
		return nil, err
	}
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: id, Spec: spec, NoPivotRoot: opts.NoPivotRoot, NoNewKeyring: opts.NoNewKeyring,
	})
	if err != nil {
		return nil, fmt.Errorf("build container config: %w", err)
	}
	if err := seccomp.Check(cfg.Seccomp); err != nil {
		return nil, err
	}
	rules := append([]*config.Rule{{Type: config.WildcardDevice, Major: config.Wildcard, Minor: config.Wildcard, Permissions: "rwm", Allow: false}}, allowedDevices...)
	for _, d := range spec.Linux.Devices {
		t := config.Type(d.Type[0])
		if d.Type == "u" {
			t = config.CharDevice
		}
		rules = append(rules, &config.Rule{Type: t, Major: d.Major, Minor: d.Minor, Permissions: "rwm", Allow: true})
	}
	cfg.Cgroups.Resources.Devices = rules
	lc, err := libcontainer.Create(stateRoot, id, cfg)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", id, err)
	}
	return &Container{lc: lc}, nil
}

// OCIIO is the standard I/O of a process started from an OCI process spec:
// with a terminal, the pty's master is sent over ConsoleSocket (a connected
// unix socket); without, the process inherits Stdin, Stdout and Stderr.
type OCIIO struct {
	Stdin          *os.File
	Stdout, Stderr *os.File
	ConsoleSocket  *os.File
	// ExtraFiles are passed to the process as fd 3, 4, ... (runc's
	// --preserve-fds).
	ExtraFiles []*os.File
}

// StartOCI starts the container's init process from the spec's process and
// leaves it waiting: the container is "created" until Release. It returns
// the init's host PID. The process stays this program's child; when this
// program exits it is reparented (to containerd's shim, a subreaper).
func (c *Container) StartOCI(p *specs.Process, stdio OCIIO) (int, error) {
	lp, err := ociProcess(p, stdio)
	if err != nil {
		return 0, err
	}
	lp.Init = true
	if err := c.lc.Start(lp); err != nil {
		return 0, fmt.Errorf("start container %s: %w", c.ID(), err)
	}
	return lp.Pid()
}

// Release lets the init of a created container run its process.
func (c *Container) Release() error {
	if err := c.lc.Exec(); err != nil {
		return fmt.Errorf("start container %s: %w", c.ID(), err)
	}
	return nil
}

// ExecOCI starts one more process in the running container, from an OCI
// process spec, with no_new_privs always set, and returns its host PID.
func (c *Container) ExecOCI(p *specs.Process, stdio OCIIO) (int, error) {
	p.NoNewPrivileges = true
	lp, err := ociProcess(p, stdio)
	if err != nil {
		return 0, err
	}
	if err := c.lc.Run(lp); err != nil {
		return 0, fmt.Errorf("exec in container %s: %w", c.ID(), err)
	}
	return lp.Pid()
}

// SignalOCI sends sig to the container's init. SIGKILL reaches every
// process (libcontainer kills the whole cgroup when the container shares
// a PID namespace); it returns ErrNotRunning when nothing runs.
func (c *Container) SignalOCI(sig unix.Signal) error {
	if err := c.lc.Signal(sig); err != nil {
		return fmt.Errorf("signal container %s: %w", c.ID(), err)
	}
	return nil
}

// Processes returns the host PIDs of every process in the container's
// cgroup.
func (c *Container) Processes() ([]int, error) {
	pids, err := c.lc.Processes()
	if err != nil {
		return nil, fmt.Errorf("list processes of container %s: %w", c.ID(), err)
	}
	return pids, nil
}

// OCIState is what runc's state command reports of a container.
type OCIState struct {
	Version     string
	ID          string
	Pid         int // 0 once stopped
	Status      string
	Bundle      string
	Rootfs      string
	Created     time.Time
	Annotations map[string]string
}

// State returns the container's state as runc reports it.
func (c *Container) State() (OCIState, error) {
	status, err := c.lc.Status()
	if err != nil {
		return OCIState{}, fmt.Errorf("status of container %s: %w", c.ID(), err)
	}
	st, err := c.lc.State()
	if err != nil {
		return OCIState{}, fmt.Errorf("state of container %s: %w", c.ID(), err)
	}
	s := OCIState{Version: st.Config.Version, ID: st.ID, Pid: st.InitProcessPid, Status: status.String(),
		Rootfs: st.Config.Rootfs, Created: st.Created, Annotations: map[string]string{}}
	if status == libcontainer.Stopped {
		s.Pid = 0
	}
	for _, l := range st.Config.Labels {
		k, v, ok := strings.Cut(l, "=")
		switch {
		case !ok:
		case k == "bundle":
			s.Bundle = v
		default:
			s.Annotations[k] = v
		}
	}
	return s, nil
}

// Update applies new cgroup resources to the running container, as runc's
// update does: the fields r sets replace the current ones.
func (c *Container) Update(r *specs.LinuxResources) error {
	cfg := c.lc.Config()
	res := *cfg.Cgroups.Resources
	if m := r.Memory; m != nil {
		if m.Limit != nil {
			res.Memory = *m.Limit
			if *m.Limit == -1 && m.Swap == nil {
				res.MemorySwap = 0
			}
		}
		if m.Reservation != nil {
			res.MemoryReservation = *m.Reservation
		}
		if m.Swap != nil {
			res.MemorySwap = *m.Swap
		}
	}
	if p := r.CPU; p != nil {
		if p.Shares != nil {
			res.CpuShares = *p.Shares
		}
		if p.Quota != nil {
			res.CpuQuota = *p.Quota
		}
		if p.Period != nil {
			res.CpuPeriod = *p.Period
		}
		if p.Burst != nil {
			res.CpuBurst = p.Burst
		}
		if p.Cpus != "" {
			res.CpusetCpus = p.Cpus
		}
		if p.Mems != "" {
			res.CpusetMems = p.Mems
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil {
		res.PidsLimit = p.Limit
	}
	if b := r.BlockIO; b != nil && b.Weight != nil {
		res.BlkioWeight = *b.Weight
	}
	if r.Unified != nil {
		res.Unified = r.Unified
	}
	cfg.Cgroups.Resources = &res
	if err := c.lc.Set(cfg); err != nil {
		return fmt.Errorf("update container %s: %w", c.ID(), err)
	}
	return nil
}

// rlimits maps OCI rlimit names to their numbers.
var rlimits = map[string]int{
	"RLIMIT_CPU": unix.RLIMIT_CPU, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_DATA": unix.RLIMIT_DATA,
	"RLIMIT_STACK": unix.RLIMIT_STACK, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_RSS": unix.RLIMIT_RSS,
	"RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK,
	"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS, "RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE, "RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO,
	"RLIMIT_RTTIME": unix.RLIMIT_RTTIME,
}

// configRlimits converts OCI rlimits to libcontainer's.
func configRlimits(in []specs.POSIXRlimit) ([]configs.Rlimit, error) {
	var out []configs.Rlimit
	for _, rl := range in {
		n, ok := rlimits[rl.Type]
		if !ok {
			return nil, fmt.Errorf("wrong rlimit value: %s", rl.Type)
		}
		out = append(out, configs.Rlimit{Type: n, Hard: rl.Hard, Soft: rl.Soft})
	}
	return out, nil
}

// ociProcess converts an OCI process spec as runc does.
func ociProcess(p *specs.Process, stdio OCIIO) (*libcontainer.Process, error) {
	if p == nil || len(p.Args) == 0 {
		return nil, errors.New("process has no args")
	}
	if p.Terminal != (stdio.ConsoleSocket != nil) {
		if p.Terminal {
			return nil, errors.New("cannot allocate tty if runc will detach without setting console socket")
		}
		return nil, errors.New("cannot use console socket if runc will not detach or allocate tty")
	}
	nnp := p.NoNewPrivileges
	lp := &libcontainer.Process{
		Args: p.Args, Env: p.Env, UID: int(p.User.UID), GID: int(p.User.GID), Cwd: p.Cwd,
		Label: p.SelinuxLabel, NoNewPrivileges: &nnp, AppArmorProfile: p.ApparmorProfile,
		Scheduler: p.Scheduler, IOPriority: p.IOPriority,
	}
	if p.ConsoleSize != nil {
		lp.ConsoleWidth, lp.ConsoleHeight = uint16(p.ConsoleSize.Width), uint16(p.ConsoleSize.Height)
	}
	if c := p.Capabilities; c != nil {
		lp.Capabilities = &configs.Capabilities{Bounding: c.Bounding, Effective: c.Effective,
			Inheritable: c.Inheritable, Permitted: c.Permitted, Ambient: c.Ambient}
	}
	for _, g := range p.User.AdditionalGids {
		lp.AdditionalGroups = append(lp.AdditionalGroups, int(g))
	}
	var err error
	if lp.Rlimits, err = configRlimits(p.Rlimits); err != nil {
		return nil, err
	}
	aff, err := configs.ConvertCPUAffinity(p.ExecCPUAffinity)
	if err != nil {
		return nil, err
	}
	lp.CPUAffinity = aff
	lp.ExtraFiles = stdio.ExtraFiles
	if stdio.ConsoleSocket != nil {
		lp.ConsoleSocket = stdio.ConsoleSocket
	} else {
		if stdio.Stdin != nil {
			lp.Stdin = stdio.Stdin
		}
		if stdio.Stdout != nil {
			lp.Stdout = stdio.Stdout
		}
		if stdio.Stderr != nil {
			lp.Stderr = stdio.Stderr
		}
	}
	return lp, nil
}

// Features describes what CreateOCI supports, in the OCI features format
// (runc features): the spec versions, hooks, mount options, namespaces,
// capabilities, cgroup v1 and v2 (cgroupfs; no systemd driver) and seccomp.
func Features() *features.Features {
	t, f := true, false
	feat := &features.Features{
		OCIVersionMin: "1.0.0",
		OCIVersionMax: specs.Version,
		Hooks:         configs.KnownHookNames(),
		MountOptions:  specconv.KnownMountOptions(),
		Linux: &features.Linux{
			Namespaces:   specconv.KnownNamespaces(),
			Capabilities: capabilities.KnownCapabilities(),
			Cgroup:       &features.Cgroup{V1: &t, V2: &t, Systemd: &f, SystemdUser: &f},
			Apparmor:     &features.Apparmor{Enabled: &f},
			Selinux:      &features.Selinux{Enabled: &f},
		},
	}
	if lcseccomp.Enabled {
		feat.Linux.Seccomp = &features.Seccomp{Enabled: &t, Actions: lcseccomp.KnownActions(),
			Operators: lcseccomp.KnownOperators(), Archs: lcseccomp.KnownArchs(),
			KnownFlags: lcseccomp.KnownFlags(), SupportedFlags: lcseccomp.SupportedFlags()}
	}
	return feat
}

// LogTo sends libcontainer's own messages (warnings of a container's init
// stage among them) to w, as logrus JSON lines with json set, as runc's
// --log and --log-format do; by default they go to stderr, which under
// containerd is the container's own log.
func LogTo(w io.Writer, json bool) {
	logrus.SetOutput(w)
	if json {
		logrus.SetFormatter(&logrus.JSONFormatter{})
	}
}
