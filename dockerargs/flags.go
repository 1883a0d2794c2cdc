package dockerargs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx"
)

// SandboxFlags are the flags of docker run, create and podman's, as sbx
// run, create and prepare take them, in their text forms; Options turns
// them into sbx.Options.
type SandboxFlags struct {
	Memory, Disk            string // sizes: "256m", "1g"
	CPUs                    float64
	PidsLimit               int64 // 0 or -1: unlimited
	Timeout                 time.Duration
	Env, EnvFiles           []string // KEY=VALUE or KEY (from this environment); KEY=VALUE files
	Workdir, User, Hostname string
	ReadOnly                bool
	Seccomp                 string
	CapAdd, CapDrop         []string
	Network, Egress         string
	Publish, HostPorts, DNS []string
	Rootfs                  string
	Pull                    string
	UserNS                  string
	// DiskBacking is --disk-backing: memory (a tmpfs, the default) or
	// disk.
	DiskBacking string
	// EgressPolicy is --egress-policy FILE, read into Options.
	EgressPolicy string
	// Secrets are --secret [PREFIX:]NAME@HOST[,HOST...]; each value is
	// NAME in this process's environment, or a line of SecretStdin.
	Secrets     []string
	SecretStdin io.Reader
	// PublishAll is -P; AddHosts --add-host NAME:IP; Ulimits --ulimit
	// NAME=SOFT[:HARD]; ShmSize --shm-size ("256m").
	PublishAll bool
	AddHosts   []string
	Ulimits    []string
	ShmSize    string
}

// Options turns the flags into sbx.Options. local is set when the sandbox
// runs on this host: a Rootfs is then made absolute and must exist (for a
// server it is a path on the server's host).
func (f *SandboxFlags) Options(local bool) (sbx.Options, error) {
	var o sbx.Options
	if f.Memory != "" {
		n, err := units.RAMInBytes(f.Memory)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("invalid --memory %q: use a size like 256m or 1g", f.Memory)
		}
		o.Limits.MemoryBytes = n
	}
	if n := runtime.NumCPU(); f.CPUs > float64(n) || f.CPUs < 0 {
		return o, fmt.Errorf("invalid --cpus %v: this host has %d CPUs", f.CPUs, n)
	}
	o.Limits.CPUs = f.CPUs
	switch {
	case f.PidsLimit == -1: // unlimited, as docker and podman take it
	case f.PidsLimit < 0:
		return o, fmt.Errorf("invalid --pids-limit %d: use a positive number, or -1 for no limit", f.PidsLimit)
	default:
		o.Limits.Pids = f.PidsLimit
	}
	if f.Timeout < 0 {
		return o, fmt.Errorf("invalid --timeout %v: must be positive", f.Timeout)
	}
	if f.Disk != "" {
		n, err := units.RAMInBytes(f.Disk)
		if err != nil || n < 1<<20 {
			return o, fmt.Errorf("invalid --disk %q: use a size of at least 1m, like 512m or 2g", f.Disk)
		}
		o.Limits.DiskBytes = n
	}
	if err := f.containerExtras(&o); err != nil {
		return o, err
	}
	if f.Workdir != "" && !filepath.IsAbs(f.Workdir) {
		return o, fmt.Errorf("invalid --workdir %q: must be an absolute path", f.Workdir)
	}
	if f.Rootfs != "" && local {
		abs, err := filepath.Abs(f.Rootfs)
		if err != nil {
			return o, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return o, fmt.Errorf("--rootfs %s is not a directory", f.Rootfs)
		}
		f.Rootfs = abs
	}
	env, err := f.Environ()
	if err != nil {
		return o, err
	}
	o.Rootfs, o.Env, o.Pull = f.Rootfs, env, f.Pull
	o.Workdir, o.User, o.Hostname = f.Workdir, f.User, f.Hostname
	o.ReadonlyRootfs, o.Seccomp, o.CapAdd, o.CapDrop = f.ReadOnly, f.Seccomp, f.CapAdd, f.CapDrop
	o.UserNS, o.DiskBacking = f.UserNS, f.DiskBacking
	o.Network, o.Publish, o.Egress, o.AllowHostPorts, o.DNS = f.Network, f.Publish, f.Egress, f.HostPorts, f.DNS
	if f.EgressPolicy != "" {
		b, err := os.ReadFile(f.EgressPolicy)
		if err != nil {
			return o, fmt.Errorf("--egress-policy: %w", err)
		}
		o.EgressPolicy = string(b)
	}
	for _, spec := range f.Secrets {
		s, err := sbx.ParseSecret(spec, os.Getenv, f.SecretStdin)
		if err != nil {
			return o, err
		}
		o.Secrets = append(o.Secrets, s)
	}
	return o, nil
}

// containerExtras fills -P, --add-host, --ulimit and --shm-size into o.
func (f *SandboxFlags) containerExtras(o *sbx.Options) error {
	o.PublishAll = f.PublishAll
	for _, h := range f.AddHosts {
		if _, _, err := sbx.ParseExtraHost(h); err != nil {
			return fmt.Errorf("--add-host: %w", err)
		}
		o.ExtraHosts = append(o.ExtraHosts, h)
	}
	for _, u := range f.Ulimits {
		ul, err := sbx.ParseUlimit(u)
		if err != nil {
			return fmt.Errorf("--ulimit: %w", err)
		}
		o.Ulimits = append(o.Ulimits, ul)
	}
	if f.ShmSize != "" {
		n, err := units.RAMInBytes(f.ShmSize)
		if err != nil || n < 4096 {
			return fmt.Errorf("invalid --shm-size %q: use a size of at least 4k, like 64m or 1g", f.ShmSize)
		}
		o.ShmSizeBytes = n
	}
	return nil
}

// Environ collects EnvFiles and Env, in that order (later wins); a bare
// KEY takes its value from this process's environment.
func (f *SandboxFlags) Environ() ([]string, error) {
	var out []string
	for _, path := range f.EnvFiles {
		fh, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read --env-file: %w", err)
		}
		vars, err := sbx.ReadEnvFile(fh, path, os.LookupEnv)
		fh.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, vars...)
	}
	for _, e := range f.Env {
		v, err := sbx.EnvEntry(e, os.LookupEnv)
		if err != nil {
			return nil, err
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return sbx.MergeEnv(nil, out), nil
}

// CreateFlags are the flags of docker create: those of run plus a name,
// mounts, labels and sbx's --ttl.
type CreateFlags struct {
	SandboxFlags
	Name           string
	Volumes, Tmpfs []string // HOST:CONTAINER[:ro|rw][,idmap=host]; CONTAINER[:size=SIZE]
	Mounts         []string // --mount type=bind|tmpfs,...
	Labels         []string // KEY=VALUE
	TTL            time.Duration
	IdleTimeout    time.Duration
	// Restart is --restart: no, on-failure[:N], always or unless-stopped.
	Restart string
}

// Options turns the flags and args (the image, or none with Rootfs) into
// sbx.Options; local as in SandboxFlags.Options. Timeout is refused: a
// sandbox's lifetime is TTL.
func (o *CreateFlags) Options(args []string, local bool) (sbx.Options, error) {
	if o.Timeout != 0 {
		return sbx.Options{}, errors.New("--timeout applies to sbx run and sbx exec; a sandbox's lifetime is --ttl")
	}
	switch {
	case len(args) == 1 && o.Rootfs != "":
		return sbx.Options{}, errors.New("give either an image or --rootfs, not both")
	case len(args) == 0 && o.Rootfs == "":
		return sbx.Options{}, errors.New("give an image or --rootfs DIR")
	}
	opts, err := o.SandboxFlags.Options(local)
	if err != nil {
		return opts, err
	}
	if len(args) == 1 {
		opts.Image = args[0]
	}
	if o.TTL < 0 || o.IdleTimeout < 0 {
		return opts, fmt.Errorf("invalid --ttl %v or --idle-timeout %v: must be positive", o.TTL, o.IdleTimeout)
	}
	opts.Name, opts.TTL, opts.IdleTimeout = o.Name, o.TTL, o.IdleTimeout
	if opts.Restart, err = sbx.ParseRestartPolicy(o.Restart); err != nil {
		return opts, err
	}
	if err := AddMounts(&opts, o.Volumes, o.Tmpfs, local); err != nil {
		return opts, err
	}
	if err := AddMountFlags(&opts, o.Mounts, local); err != nil {
		return opts, err
	}
	opts.Labels, err = ParseLabels(o.Labels)
	return opts, err
}

// RunFlags are the flags of docker run: those of every sandbox, mounts,
// and -d, which starts the command as the main command of a long-lived
// sandbox (sbx create with a command); then --name, --label, --ttl and
// --rm (a background remover) apply. Without -d, --rm is what run always
// does.
type RunFlags struct {
	SandboxFlags
	Entrypoint     string // given: replaces the image's (Entrypoint)
	Interactive    bool   // -i: stdin connected to the command
	Tty            bool   // -t: a terminal for the command
	Report         string // a file for the JSON resource report
	Stats          bool   // a resource report on stderr
	Detach, Rm     bool
	Name           string
	Volumes, Tmpfs []string // HOST:CONTAINER[:ro|rw][,idmap=host]; CONTAINER[:size=SIZE]
	Mounts         []string // --mount type=bind|tmpfs,...
	Labels         []string // KEY=VALUE
	TTL            time.Duration
	IdleTimeout    time.Duration
	// Restart is --restart, as for create (with -d).
	Restart string
}

// Options turns the flags and args (IMAGE [CMD...], CMD... with Rootfs, or
// -- CMD... in host mode; dashAt is where "--" was, -1 if nowhere) into
// sbx.Options and the command; local as in SandboxFlags.Options. Without
// Detach, Name, Labels and TTL are refused. With it, the flags that need
// the command's end or a terminal are refused when changed says they were
// given ("interactive", "tty", "report", "stats"), and so is Timeout.
func (f *RunFlags) Options(args []string, dashAt int, local bool, changed func(flag string) bool) (sbx.Options, []string, error) {
	opts, err := f.SandboxFlags.Options(local)
	if err != nil {
		return opts, nil, err
	}
	if err := AddMounts(&opts, f.Volumes, f.Tmpfs, local); err != nil {
		return opts, nil, err
	}
	if err := AddMountFlags(&opts, f.Mounts, local); err != nil {
		return opts, nil, err
	}
	var cmd []string
	if opts.Image, cmd, err = SplitRunArgs(args, f.Rootfs != "", dashAt); err != nil {
		return opts, nil, err
	}
	if !f.Detach && (f.TTL != 0 || f.IdleTimeout != 0 || f.Restart != "") {
		return opts, nil, errors.New("--ttl, --idle-timeout and --restart are for a sandbox that outlives its command: add -d (sbx run -d --ttl 1h IMAGE CMD), or use sbx create")
	}
	if !f.Named() {
		return opts, cmd, nil
	}
	for _, bad := range []string{"interactive", "tty", "report", "stats"} {
		switch {
		case changed(bad) && f.Detach:
			return opts, nil, fmt.Errorf("--%s does not go with -d: the command runs on in the background (follow it with sbx logs -f, wait with sbx wait, remove with sbx rm or --ttl)", bad)
		case changed(bad):
			return opts, nil, fmt.Errorf("--%s does not go with --name or --label without -d: such a run is a sandbox's main command, whose output is followed (run it with sbx create and sbx exec -it, or leave out --name)", bad)
		}
	}
	if f.Timeout != 0 {
		return opts, nil, errors.New("--timeout does not go with -d, --name or --label: such a sandbox's lifetime is --ttl")
	}
	if f.TTL < 0 || f.IdleTimeout < 0 {
		return opts, nil, fmt.Errorf("invalid --ttl %v or --idle-timeout %v: must be positive", f.TTL, f.IdleTimeout)
	}
	if opts.Labels, err = ParseLabels(f.Labels); err != nil {
		return opts, nil, err
	}
	opts.Name, opts.TTL, opts.IdleTimeout, opts.AutoRemove = f.Name, f.TTL, f.IdleTimeout, f.Rm
	if opts.Restart, err = sbx.ParseRestartPolicy(f.Restart); err != nil {
		return opts, nil, err
	}
	return opts, cmd, nil
}

// Named reports whether the run is a sandbox others see while it runs:
// with -d, or named or labelled (docker run --name N without -d: a
// sandbox whose main command's output is followed, removed at its end).
func (f *RunFlags) Named() bool {
	return f.Detach || f.Name != "" || len(f.Labels) > 0
}

// AddMounts adds --volume and --tmpfs mounts to opts; local as in
// ParseVolume.
func AddMounts(opts *sbx.Options, volumes, tmpfs []string, local bool) error {
	for _, v := range volumes {
		vol, err := ParseVolume(v, local)
		if err != nil {
			return err
		}
		opts.Volumes = append(opts.Volumes, vol)
	}
	for _, t := range tmpfs {
		tm, err := sbx.ParseTmpfs(t)
		if err != nil {
			return fmt.Errorf("invalid --tmpfs %q: %w", t, err)
		}
		opts.Tmpfs = append(opts.Tmpfs, tm)
	}
	return nil
}

// ParseVolume parses SOURCE:CONTAINER[:OPTIONS] (sbx.ParseVolume): a named
// volume, or a host directory. When local (the sandbox runs on this host)
// the host directory is made absolute and must exist; for a server it is
// a path on the server's host.
func ParseVolume(s string, local bool) (sbx.Volume, error) {
	v, err := sbx.ParseVolume(s)
	if err != nil {
		return v, fmt.Errorf("invalid --volume %q: %w", s, err)
	}
	if local && v.Name == "" {
		if v.HostPath, err = filepath.Abs(v.HostPath); err == nil {
			_, err = os.Stat(v.HostPath)
		}
		if err != nil {
			return v, fmt.Errorf("invalid --volume %q: %w", s, err)
		}
	}
	return v, nil
}
