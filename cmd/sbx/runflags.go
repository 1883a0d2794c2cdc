package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/netns"
)

// sandboxFlags are the flags shared by `sbx run` and `sbx create`, spelled
// as docker and podman spell them.
type sandboxFlags struct {
	memory    string
	cpus      float64
	pidsLimit int64
	timeout   time.Duration
	env       []string
	envFiles  []string
	workdir   string
	user      string
	hostname  string
	readOnly  bool
	seccomp   string
	capAdd    []string
	capDrop   []string
	network   string
	publish   []string
	egress    string
	hostPorts []string
	dns       []string
	rootfs    string
	disk      string
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

// limits parses the resource flags.
func (f *sandboxFlags) limits() (cgroup.Limits, error) {
	var l cgroup.Limits
	if f.memory != "" {
		n, err := units.RAMInBytes(f.memory)
		if err != nil || n <= 0 {
			return l, fmt.Errorf("invalid --memory %q: use a size like 256m or 1g", f.memory)
		}
		l.MemoryBytes = n
	}
	l.CPUs = f.cpus
	if n := runtime.NumCPU(); f.cpus > float64(n) {
		return l, fmt.Errorf("invalid --cpus %v: this host has %d CPUs", f.cpus, n)
	}
	l.Pids = f.pidsLimit
	switch {
	case f.pidsLimit == -1:
		l.Pids = 0 // unlimited, as docker and podman take it
	case f.pidsLimit < 0:
		return l, fmt.Errorf("invalid --pids-limit %d: use a positive number, or -1 for no limit", f.pidsLimit)
	}
	if f.timeout < 0 {
		return l, fmt.Errorf("invalid --timeout %v: must be positive", f.timeout)
	}
	return l, l.Validate()
}

func (f *sandboxFlags) diskBytes() (int64, error) {
	if f.disk == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(f.disk)
	if err != nil || n < 1<<20 {
		return 0, fmt.Errorf("invalid --disk %q: use a size of at least 1m, like 512m or 2g", f.disk)
	}
	return n, nil
}

// networkOptions parses the network flags.
func (f *sandboxFlags) networkOptions() (netns.AttachOptions, error) {
	o, err := netns.ParseFlags(netns.Flags{Network: f.network, Publish: f.publish, Egress: f.egress,
		AllowHostPorts: f.hostPorts, DNS: f.dns, Hostname: f.hostname})
	if err != nil {
		return o, err
	}
	if o.Mode == netns.ModeHost {
		slog.Warn("--network host: the sandbox shares the host's network namespace; nothing of the network is isolated")
	}
	return o, nil
}

// environ collects --env-file and --env, in that order (later wins).
func (f *sandboxFlags) environ() ([]string, error) {
	var out []string
	for _, path := range f.envFiles {
		vars, err := readEnvFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, vars...)
	}
	for _, e := range f.env {
		v, err := envEntry(e)
		if err != nil {
			return nil, err
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return dedupEnv(out), nil
}

// envEntry turns KEY=VALUE into itself and KEY into KEY=<sbx's value>, or
// "" when sbx has no such variable.
func envEntry(e string) (string, error) {
	k, _, hasValue := strings.Cut(e, "=")
	if k == "" || strings.ContainsAny(k, " \t\x00") {
		return "", fmt.Errorf("invalid environment variable %q: use KEY=VALUE", e)
	}
	if hasValue {
		return e, nil
	}
	if v, ok := os.LookupEnv(k); ok {
		return k + "=" + v, nil
	}
	return "", nil
}

func readEnvFile(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read --env-file: %w", err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := envEntry(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if v != "" {
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// dedupEnv keeps the last value of each key, in first-seen order.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}
