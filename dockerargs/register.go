package dockerargs

import (
	"os"

	"github.com/spf13/pflag"
)

// The flags as docker and podman spell them, registered on a flag set
// (the CLI's commands, or any front-end that takes docker's flags): one
// place for each flag's name, shorthand and help.

// Register adds the flags every sandbox takes (sbx run, create, prepare)
// to fs. --secret's stdin is this process's.
func (f *SandboxFlags) Register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Memory, "memory", "m", "", "memory limit (e.g. 256m, 1g); swap is disabled")
	fs.Float64Var(&f.CPUs, "cpus", 0, "CPU quota in CPUs (e.g. 0.5)")
	fs.Int64Var(&f.PidsLimit, "pids-limit", 0, "maximum number of processes of the command (0 or -1: unlimited)")
	fs.DurationVar(&f.Timeout, "timeout", 0, "wall-clock limit (e.g. 30s); kills every process of the sandbox")
	fs.StringArrayVarP(&f.Env, "env", "e", nil, "set an environment variable (KEY=VALUE, or KEY to copy it from sbx's environment)")
	fs.StringArrayVar(&f.EnvFiles, "env-file", nil, "read environment variables from a file (KEY=VALUE lines)")
	fs.StringVarP(&f.Workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&f.User, "user", "u", "", "user to run as: name, UID, name:group or UID:GID (resolved in the sandbox's /etc/passwd)")
	fs.StringVarP(&f.Hostname, "hostname", "h", "", "hostname inside the sandbox (help is --help)")
	if fs.Lookup("help") == nil { // -h is the hostname, as in docker run: help is --help only
		fs.Bool("help", false, "help for this command")
	}
	fs.BoolVar(&f.ReadOnly, "read-only", false, "mount the root filesystem read-only (with a tmpfs at /tmp)")
	fs.StringVar(&f.Seccomp, "seccomp", "default", "seccomp profile: default, unconfined, or a JSON profile file")
	fs.StringSliceVar(&f.CapAdd, "cap-add", nil, "add capabilities to Docker's default set (or ALL)")
	fs.StringSliceVar(&f.CapDrop, "cap-drop", nil, "drop capabilities (or ALL)")
	fs.StringVar(&f.Network, "network", "none", "network: none (only lo), host, or bridge (NAT through sbx0)")
	fs.StringArrayVarP(&f.Publish, "publish", "p", nil, "publish a port with --network bridge: [IP:][HOSTPORT:]CTRPORT[/tcp|/udp] (no HOSTPORT, or 0: a free one)")
	fs.BoolVarP(&f.PublishAll, "publish-all", "P", false, "publish every port the image exposes on a free host port (--network bridge)")
	fs.StringArrayVar(&f.AddHosts, "add-host", nil, "add a line to /etc/hosts: NAME:IP")
	fs.StringArrayVar(&f.Ulimits, "ulimit", nil, "set a resource limit: NAME=SOFT[:HARD], e.g. nofile=1024:2048 (-1: unlimited)")
	fs.StringVar(&f.ShmSize, "shm-size", "", "size of /dev/shm, counted toward --memory (default 64m)")
	fs.StringVar(&f.Egress, "egress", "", "bridge egress: allow-list of CIDRs and host names (api.x.com, *.x.com, **.x.com, :PORT; !ENTRY denies; * all), or none (default: internet, no private ranges)")
	fs.StringVar(&f.EgressPolicy, "egress-policy", "", "bridge egress from a policy file (YAML: allow, deny, hosts with L7 rules, secrets; docs/network.md), instead of --egress")
	fs.StringArrayVar(&f.Secrets, "secret", nil, "bridge: [PREFIX:]NAME@HOST[,HOST...]: NAME holds a placeholder the egress proxy swaps for the value (from NAME in sbx's environment, else stdin) on requests to HOST")
	f.SecretStdin = os.Stdin
	fs.StringArrayVar(&f.HostPorts, "allow-host-port", nil, "let a bridged sandbox reach this host port: PORT[/tcp|/udp]")
	fs.StringArrayVar(&f.DNS, "dns", nil, "name server for a bridged sandbox's /etc/resolv.conf")
	fs.StringVar(&f.Rootfs, "rootfs", "", "root filesystem directory (read-only lower layer; never modified)")
	fs.StringVar(&f.UserNS, "userns", "", "user namespace: private (the default with an image or --rootfs: the sandbox's root is an unprivileged host id range of its own, for files and per-user kernel limits) or host (the host's; needed for checkpoints, fork and idle timeouts; the only mode of host mode); see docs/security.md")
	fs.StringVar(&f.DiskBacking, "disk-backing", "", "where the writable layer lives: memory (a tmpfs counted toward --memory, the default) or disk (under the state root, not capped by --disk)")
	fs.StringVar(&f.Disk, "disk", "", "size cap of the writable layer, a tmpfs in memory whose pages count toward --memory: beyond --memory a write is OOM-killed rather than failing with ENOSPC (e.g. 512m; default: --memory if set, else 2g)")
}

// registerMounts adds --volume, --tmpfs and --mount.
func registerMounts(fs *pflag.FlagSet, volumes, tmpfs, mounts *[]string) {
	fs.StringArrayVar(mounts, "mount", nil, "mount as docker's --mount: type=bind,source=HOST,target=PATH[,readonly], type=volume,source=NAME,target=PATH[,readonly] or type=tmpfs,target=PATH[,tmpfs-size=SIZE]")
	fs.StringArrayVarP(volumes, "volume", "v", nil, "mount a host directory: HOST:CONTAINER[:OPTIONS], OPTIONS comma-separated: ro or rw, idmap=host")
	fs.StringArrayVar(tmpfs, "tmpfs", nil, "mount an empty tmpfs: CONTAINER[:size=SIZE]")
}

// registerPull adds --pull.
func registerPull(fs *pflag.FlagSet, pull *string) {
	fs.StringVar(pull, "pull", "", "pull the image: missing, always or never (default SBX_PULL, else missing)")
}

// RegisterStart adds the flags of what a sandbox starts with: those of
// every sandbox, mounts and the pull policy (sbx create, sbx pool create).
func (o *CreateFlags) RegisterStart(fs *pflag.FlagSet) {
	o.SandboxFlags.Register(fs)
	registerMounts(fs, &o.Volumes, &o.Tmpfs, &o.Mounts)
	registerPull(fs, &o.Pull)
}

// Register adds the flags of docker create: RegisterStart's and a name,
// labels, --ttl and --idle-timeout.
func (o *CreateFlags) Register(fs *pflag.FlagSet) {
	o.RegisterStart(fs)
	fs.StringVar(&o.Name, "name", "", "a unique name for the sandbox")
	fs.StringArrayVarP(&o.Labels, "label", "l", nil, "set a label: KEY=VALUE")
	fs.DurationVar(&o.TTL, "ttl", 0, "remove the sandbox this long after its creation (e.g. 30m)")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 0, "checkpoint the sandbox to disk once unused this long; the next exec restores it (e.g. 10m)")
	fs.StringVar(&o.Restart, "restart", "", "restart the main command when it exits: no, on-failure[:N], always or unless-stopped")
}

// Register adds the flags of docker run: those of every sandbox, mounts,
// the pull policy, the command's input, terminal and report, and -d with
// what names a detached sandbox.
func (f *RunFlags) Register(fs *pflag.FlagSet) {
	f.SandboxFlags.Register(fs)
	registerPull(fs, &f.Pull)
	registerMounts(fs, &f.Volumes, &f.Tmpfs, &f.Mounts)
	fs.StringVar(&f.Entrypoint, "entrypoint", "", "replace the image's entrypoint (and drop its Cmd)")
	fs.BoolVarP(&f.Interactive, "interactive", "i", false, "keep stdin open and connect it to the command")
	fs.BoolVarP(&f.Tty, "tty", "t", false, "allocate a terminal for the command")
	fs.StringVar(&f.Report, "report", "", "write a JSON resource report to this file")
	fs.BoolVar(&f.Stats, "stats", false, "print a resource report on stderr")
	fs.BoolVarP(&f.Detach, "detach", "d", false, "start the command in a long-lived sandbox, print its ID and return")
	fs.BoolVar(&f.Rm, "rm", false, "remove the sandbox when the command exits (what sbx run always does without -d; with -d a background process does it)")
	fs.StringVar(&f.Name, "name", "", "a unique name for the sandbox (without -d: its output is followed and it is removed at the end)")
	fs.StringArrayVarP(&f.Labels, "label", "l", nil, "set a label: KEY=VALUE (as --name without -d)")
	fs.DurationVar(&f.TTL, "ttl", 0, "remove the sandbox this long after its creation (with -d)")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", 0, "checkpoint the sandbox to disk once unused this long (with -d)")
	fs.StringVar(&f.Restart, "restart", "", "restart the command when it exits: no, on-failure[:N], always or unless-stopped (with -d)")
}

// Register adds the flags of docker exec.
func (f *ExecFlags) Register(fs *pflag.FlagSet) {
	fs.BoolVarP(&f.Detach, "detach", "d", false, "start the command in the background and return at once")
	fs.BoolVarP(&f.Interactive, "interactive", "i", false, "keep stdin open and connect it to the command")
	fs.BoolVarP(&f.Tty, "tty", "t", false, "allocate a terminal for the command")
	fs.StringArrayVarP(&f.Env, "env", "e", nil, "set an environment variable: KEY=VALUE")
	fs.StringVarP(&f.Workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&f.User, "user", "u", "", "user to run as: name, UID or UID:GID")
	fs.DurationVar(&f.Timeout, "timeout", 0, "kill the command after this long (e.g. 30s)")
}

// Register adds the flags of docker ps: the selection and the output.
func (p *PsFlags) Register(fs *pflag.FlagSet) {
	fs.BoolVarP(&p.All, "all", "a", false, "show all sandboxes, also stopped ones")
	fs.BoolVarP(&p.Quiet, "quiet", "q", false, "print only IDs")
	fs.BoolVar(&p.NoTrunc, "no-trunc", false, "print full IDs")
	fs.IntVarP(&p.Last, "last", "n", 0, "show the N sandboxes created last (of all)")
	fs.BoolVarP(&p.Latest, "latest", "l", false, "show the sandbox created last (of all)")
	fs.BoolVar(&p.Pooled, "pooled", false, "also show the idle members of warm pools (sbx pool)")
	fs.StringVar(&p.Format, "format", "table", "output format: table, json, or a Go template per sandbox")
	fs.StringArrayVarP(&p.Filters, "filter", "f", nil, "filter: label=KEY[=VALUE], status=STATUS, name=NAME")
}
