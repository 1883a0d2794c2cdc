package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/sandbox"
)

// registerSandboxFlags adds the flags shared by sbx run, create and
// prepare, spelled as docker and podman spell them, to fs.
func registerSandboxFlags(fs *pflag.FlagSet, f *dockerargs.SandboxFlags) {
	fs.StringVarP(&f.Memory, "memory", "m", "", "memory limit (e.g. 256m, 1g); swap is disabled")
	fs.Float64Var(&f.CPUs, "cpus", 0, "CPU quota in CPUs (e.g. 0.5)")
	fs.Int64Var(&f.PidsLimit, "pids-limit", 0, "maximum number of processes of the command (0 or -1: unlimited)")
	fs.DurationVar(&f.Timeout, "timeout", 0, "wall-clock limit (e.g. 30s); kills every process of the sandbox")
	fs.StringArrayVarP(&f.Env, "env", "e", nil, "set an environment variable (KEY=VALUE, or KEY to copy it from sbx's environment)")
	fs.StringArrayVar(&f.EnvFiles, "env-file", nil, "read environment variables from a file (KEY=VALUE lines)")
	fs.StringVarP(&f.Workdir, "workdir", "w", "", "working directory inside the sandbox")
	fs.StringVarP(&f.User, "user", "u", "", "user to run as: name, UID, name:group or UID:GID (resolved in the sandbox's /etc/passwd)")
	fs.StringVar(&f.Hostname, "hostname", "", "hostname inside the sandbox")
	fs.BoolVar(&f.ReadOnly, "read-only", false, "mount the root filesystem read-only (with a tmpfs at /tmp)")
	fs.StringVar(&f.Seccomp, "seccomp", "default", "seccomp profile: default, unconfined, or a JSON profile file")
	fs.StringSliceVar(&f.CapAdd, "cap-add", nil, "add capabilities to Docker's default set (or ALL)")
	fs.StringSliceVar(&f.CapDrop, "cap-drop", nil, "drop capabilities (or ALL)")
	fs.StringVar(&f.Network, "network", "none", "network: none (only lo), host, or bridge (NAT through sbx0)")
	fs.StringArrayVarP(&f.Publish, "publish", "p", nil, "publish a port with --network bridge: [IP:]HOSTPORT:CTRPORT[/tcp|/udp]")
	fs.StringVar(&f.Egress, "egress", "", "bridge egress: allow-list of CIDRs and host names (api.x.com, *.x.com, **.x.com, :PORT; !ENTRY denies; * all), or none (default: internet, no private ranges)")
	fs.StringVar(&f.EgressPolicy, "egress-policy", "", "bridge egress from a policy file (YAML: allow, deny, hosts with L7 rules, secrets; docs/network.md), instead of --egress")
	fs.StringArrayVar(&f.Secrets, "secret", nil, "bridge: [PREFIX:]NAME@HOST[,HOST...]: NAME holds a placeholder the egress proxy swaps for the value (from NAME in sbx's environment, else stdin) on requests to HOST")
	f.SecretStdin = os.Stdin
	fs.StringArrayVar(&f.HostPorts, "allow-host-port", nil, "let a bridged sandbox reach this host port: PORT[/tcp|/udp]")
	fs.StringArrayVar(&f.DNS, "dns", nil, "name server for a bridged sandbox's /etc/resolv.conf")
	fs.StringVar(&f.Rootfs, "rootfs", "", "root filesystem directory (read-only lower layer; never modified)")
	fs.StringVar(&f.UserNS, "userns", "", "user namespace: private (the default with an image or --rootfs: the sandbox's root is an unprivileged host id range of its own, for files and per-user kernel limits) or host (the host's; needed for checkpoints, fork and idle timeouts; the only mode of host mode); see docs/security.md")
	fs.StringVar(&f.Disk, "disk", "", "size cap of the writable layer, a tmpfs in memory whose pages count toward --memory: beyond --memory a write is OOM-killed rather than failing with ENOSPC (e.g. 512m; default: --memory if set, else 2g)")
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
