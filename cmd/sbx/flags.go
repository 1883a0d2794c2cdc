package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

// sandboxFlags are the flags shared by sbx run, create and prepare, spelled
// as docker and podman spell them; options turns them into sbx.Options.
type sandboxFlags struct {
	memory, disk            string
	cpus                    float64
	pidsLimit               int64
	timeout                 time.Duration
	env, envFiles           []string
	workdir, user, hostname string
	readOnly                bool
	seccomp                 string
	capAdd, capDrop         []string
	network, egress         string
	publish, hostPorts, dns []string
	rootfs                  string
	pull                    string
}

func (f *sandboxFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.memory, "memory", "m", "", "memory limit (e.g. 256m, 1g); swap is disabled")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU quota in CPUs (e.g. 0.5)")
	fs.Int64Var(&f.pidsLimit, "pids-limit", 0, "maximum number of processes of the command (0 or -1: unlimited)")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit (e.g. 30s); kills every process of the sandbox")
	fs.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable (KEY=VALUE, or KEY to copy it from sbx's environment)")
	fs.StringArrayVar(&f.envFiles, "env-file", nil, "read environment variables from a file (KEY=VALUE lines)")
	fs.StringVarP(&f.workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&f.user, "user", "u", "", "user to run as: name, UID, name:group or UID:GID (resolved in the sandbox's /etc/passwd)")
	fs.StringVar(&f.hostname, "hostname", "", "hostname inside the sandbox")
	fs.BoolVar(&f.readOnly, "read-only", false, "mount the root filesystem read-only (with a tmpfs at /tmp)")
	fs.StringVar(&f.seccomp, "seccomp", "default", "seccomp profile: default, unconfined, or a JSON profile file")
	fs.StringSliceVar(&f.capAdd, "cap-add", nil, "add capabilities to Docker's default set (or ALL)")
	fs.StringSliceVar(&f.capDrop, "cap-drop", nil, "drop capabilities (or ALL)")
	fs.StringVar(&f.network, "network", "none", "network: none (only lo), host, or bridge (NAT through sbx0)")
	fs.StringArrayVarP(&f.publish, "publish", "p", nil, "publish a port with --network bridge: [IP:]HOSTPORT:CTRPORT[/tcp|/udp]")
	fs.StringVar(&f.egress, "egress", "", "bridge egress: CIDR[,CIDR...] allow-list or none (default: internet, no private ranges)")
	fs.StringArrayVar(&f.hostPorts, "allow-host-port", nil, "let a bridged sandbox reach this host port: PORT[/tcp|/udp]")
	fs.StringArrayVar(&f.dns, "dns", nil, "name server for a bridged sandbox's /etc/resolv.conf")
	fs.StringVar(&f.rootfs, "rootfs", "", "root filesystem directory (read-only lower layer; never modified)")
	fs.StringVar(&f.disk, "disk", "", "size cap of the writable layer, a tmpfs in memory whose pages count toward --memory: beyond --memory a write is OOM-killed rather than failing with ENOSPC (e.g. 512m; default: --memory if set, else 2g)")
}

// options turns the flags into sbx.Options. local is set when the sandbox
// runs on this host: a --rootfs is then made absolute and must exist (with
// --host it is a path on the server).
func (f *sandboxFlags) options(local bool) (sbx.Options, error) {
	var o sbx.Options
	if f.memory != "" {
		n, err := units.RAMInBytes(f.memory)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("invalid --memory %q: use a size like 256m or 1g", f.memory)
		}
		o.Limits.MemoryBytes = n
	}
	if n := runtime.NumCPU(); f.cpus > float64(n) || f.cpus < 0 {
		return o, fmt.Errorf("invalid --cpus %v: this host has %d CPUs", f.cpus, n)
	}
	o.Limits.CPUs = f.cpus
	switch {
	case f.pidsLimit == -1: // unlimited, as docker and podman take it
	case f.pidsLimit < 0:
		return o, fmt.Errorf("invalid --pids-limit %d: use a positive number, or -1 for no limit", f.pidsLimit)
	default:
		o.Limits.Pids = f.pidsLimit
	}
	if f.timeout < 0 {
		return o, fmt.Errorf("invalid --timeout %v: must be positive", f.timeout)
	}
	if f.disk != "" {
		n, err := units.RAMInBytes(f.disk)
		if err != nil || n < 1<<20 {
			return o, fmt.Errorf("invalid --disk %q: use a size of at least 1m, like 512m or 2g", f.disk)
		}
		o.Limits.DiskBytes = n
	}
	if f.workdir != "" && !filepath.IsAbs(f.workdir) {
		return o, fmt.Errorf("invalid --workdir %q: must be an absolute path", f.workdir)
	}
	if f.rootfs != "" && local {
		abs, err := filepath.Abs(f.rootfs)
		if err != nil {
			return o, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return o, fmt.Errorf("--rootfs %s is not a directory", f.rootfs)
		}
		f.rootfs = abs
	}
	env, err := f.environ()
	if err != nil {
		return o, err
	}
	o.Rootfs, o.Env, o.Pull = f.rootfs, env, f.pull
	o.Workdir, o.User, o.Hostname = f.workdir, f.user, f.hostname
	o.ReadonlyRootfs, o.Seccomp, o.CapAdd, o.CapDrop = f.readOnly, f.seccomp, f.capAdd, f.capDrop
	o.Network, o.Publish, o.Egress, o.AllowHostPorts, o.DNS = f.network, f.publish, f.egress, f.hostPorts, f.dns
	return o, nil
}

// environ collects --env-file and --env, in that order (later wins).
func (f *sandboxFlags) environ() ([]string, error) {
	var out []string
	for _, path := range f.envFiles {
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
	for _, e := range f.env {
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

// imageFlags are the options of commands that pull or import: they
// configure this host's image cache, and a server has its own.
type imageFlags struct {
	platform string
	insecure []string
	quiet    bool
}

func (f *imageFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.platform, "platform", "", "platform to pick from multi-arch images (os/arch[/variant]); default the host's")
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry host[:port] to reach over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print no progress")
}

// hostConfig is the host configuration the flags ask for; with --host
// they are refused, since the server pulls with its own options.
func (f *imageFlags) hostConfig(a *app, cmd *cobra.Command) (sandbox.HostConfig, error) {
	if a.host != "" {
		for _, n := range []string{"platform", "insecure-registry"} {
			if cmd.Flags().Changed(n) {
				return sandbox.HostConfig{}, exitErr("--%s is not supported with --host: the server pulls with its own options (start sbx serve with --insecure-registry, or pull on the server host with sbx pull --%s)", n, n)
			}
		}
	}
	return sandbox.HostConfig{Platform: f.platform, InsecureRegistries: f.insecure}, nil
}
