package driver

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/client/lib/cpustats"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/sbxrun/sbx"
)

// Labels the driver puts on every sandbox, so that `sbx ls --filter` finds
// a task's sandbox and an operator sees where it came from.
const (
	LabelTaskID    = "nomad.task_id"
	LabelAllocID   = "nomad.alloc_id"
	LabelJob       = "nomad.job"
	LabelGroup     = "nomad.group"
	LabelTask      = "nomad.task"
	LabelNamespace = "nomad.namespace"
)

// Where Nomad's task directories appear inside the sandbox, as with
// Nomad's other image drivers.
const (
	allocMount   = "/alloc"
	localMount   = "/local"
	secretsMount = "/secrets"
)

// sandboxOptions turns a task into the options of its sandbox: the image's
// process with the task's overrides, Nomad's environment, resources as
// limits, the task's directories and Nomad's host volumes as volumes, and
// ports from the group's network block. img is the task's image, already
// in the cache.
func (d *Driver) sandboxOptions(cfg *drivers.TaskConfig, tc *TaskConfig, img *sbx.Image) (sbx.Options, error) {
	o := sbx.Options{
		Image:          img.Name,
		Pull:           sbx.PullNever, // StartTask pulled it already
		Workdir:        tc.Workdir,
		User:           tc.User,
		Network:        tc.networkOrNone(),
		UserNS:         tc.UserNS,
		Egress:         tc.Egress,
		Seccomp:        tc.Seccomp,
		CapAdd:         tc.CapAdd,
		CapDrop:        tc.CapDrop,
		ReadonlyRootfs: tc.ReadOnly,
		Labels:         taskLabels(cfg, tc),
	}
	if o.User == "" {
		o.User = cfg.User
	}

	// The command: the image's entrypoint and cmd, replaced as the task
	// says (an args list alone replaces the image's cmd, as in Nomad's
	// docker driver).
	var icfg sbx.ImageConfig
	if img.Config != nil {
		icfg = *img.Config
	}
	var entrypoint []string
	if tc.Entrypoint != nil {
		entrypoint = tc.Entrypoint
	}
	cmd := tc.Args
	if tc.Command != "" {
		cmd = append([]string{tc.Command}, tc.Args...)
	}
	proc, err := icfg.Process(entrypoint, cmd, nil, "", "")
	if err != nil {
		return o, fmt.Errorf("image %s: %w (set command in the task's config)", img.Name, err)
	}
	o.Cmd = proc.Args

	// Nomad's environment (NOMAD_*, the env block, secrets and templates
	// set with env = true), then the task config's env on top.
	env := maps.Clone(cfg.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.DeviceEnv)
	maps.Copy(env, tc.Env)
	o.Env = envList(env)

	if o.Limits, err = d.limits(cfg, tc); err != nil {
		return o, err
	}

	// Nomad's directories for the task, then its host volumes and CSI
	// volumes, then the job's own binds.
	td := cfg.TaskDir()
	o.Volumes = []sbx.Volume{
		{HostPath: td.SharedAllocDir, Path: allocMount},
		{HostPath: td.LocalDir, Path: localMount},
		{HostPath: td.SecretsDir, Path: secretsMount},
	}
	for _, m := range cfg.Mounts {
		o.Volumes = append(o.Volumes, sbx.Volume{HostPath: m.HostPath, Path: m.TaskPath, ReadOnly: m.Readonly})
	}
	vols, err := tc.volumes()
	if err != nil {
		return o, err
	}
	for _, v := range vols {
		o.Volumes = append(o.Volumes, sbx.Volume{HostPath: v.HostPath, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	tmpfs, err := tc.tmpfs()
	if err != nil {
		return o, err
	}
	for _, t := range tmpfs {
		o.Tmpfs = append(o.Tmpfs, sbx.Tmpfs{Path: t.Path, SizeBytes: t.SizeBytes})
	}

	if o.Network == sbx.NetworkBridge {
		if o.Publish, err = publishPorts(cfg, tc.Ports); err != nil {
			return o, err
		}
		if cfg.DNS != nil {
			o.DNS = cfg.DNS.Servers
		}
	}
	return o, nil
}

// trustedDirs are the host directories of a task that Nomad made or the
// operator allowed (its allocation directory, host and CSI volumes), which
// its sandbox may mount whatever the plugin's allowed_host_paths say.
func trustedDirs(cfg *drivers.TaskConfig) []string {
	dirs := []string{cfg.AllocDir}
	for _, m := range cfg.Mounts {
		dirs = append(dirs, m.HostPath)
	}
	return dirs
}

// taskLabels are the task config's labels plus the driver's own.
func taskLabels(cfg *drivers.TaskConfig, tc *TaskConfig) map[string]string {
	l := maps.Clone(tc.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelTaskID] = cfg.ID
	l[LabelAllocID] = cfg.AllocID
	l[LabelJob] = cfg.JobName
	l[LabelGroup] = cfg.TaskGroupName
	l[LabelTask] = cfg.Name
	if cfg.Namespace != "" {
		l[LabelNamespace] = cfg.Namespace
	}
	return l
}

// limits turns the task's resources into sandbox limits: memory_max (or
// memory) is the hard memory cap, cores or the cpu share of the node's
// compute a CPU quota (unless cpu_hard_limit = false), and pids_limit the
// process cap.
func (d *Driver) limits(cfg *drivers.TaskConfig, tc *TaskConfig) (sbx.Limits, error) {
	var l sbx.Limits
	var err error
	if l.DiskBytes, err = tc.diskBytes(); err != nil {
		return l, err
	}
	l.Pids = tc.PidsLimit
	if l.Pids == 0 {
		l.Pids = d.pluginConfig().PidsLimit
	}
	if cfg.Resources == nil || cfg.Resources.NomadResources == nil {
		return l, nil
	}
	res := cfg.Resources.NomadResources
	mem := res.Memory.MemoryMB
	if res.Memory.MemoryMaxMB > mem {
		mem = res.Memory.MemoryMaxMB
	}
	l.MemoryBytes = mem << 20
	if tc.CPUHardLimit != nil && !*tc.CPUHardLimit {
		return l, nil
	}
	if n := len(res.Cpu.ReservedCores); n > 0 {
		l.CPUs = float64(n)
	} else {
		l.CPUs = cpusOf(res.Cpu.CpuShares, d.compute())
	}
	return l, nil
}

// cpusOf converts a cpu share in MHz into CPUs of the node: the node's
// compute divided by its cores is one CPU.
func cpusOf(mhz int64, c cpustats.Compute) float64 {
	if mhz <= 0 || c.TotalCompute <= 0 || c.NumCores <= 0 {
		return 0
	}
	perCore := float64(c.TotalCompute) / float64(c.NumCores)
	cpus := float64(mhz) / perCore
	// The kernel's smallest quota is 1 ms per 100 ms period.
	return max(cpus, 0.01)
}

// publishPorts maps the task's port labels to "HOSTIP:HOSTPORT:TO/proto"
// publish specs, for TCP and UDP: the host port Nomad allocated forwards
// to the label's `to` port (or the same port).
func publishPorts(cfg *drivers.TaskConfig, labels []string) ([]string, error) {
	if len(labels) == 0 {
		return nil, nil
	}
	if cfg.Resources == nil || cfg.Resources.Ports == nil {
		return nil, fmt.Errorf("ports %v: the task group has no network block with ports", labels)
	}
	var out []string
	for _, label := range labels {
		p, ok := cfg.Resources.Ports.Get(label)
		if !ok {
			return nil, fmt.Errorf("port %q is not defined in the group's network block", label)
		}
		to := p.To
		if to <= 0 {
			to = p.Value
		}
		host := fmt.Sprint(p.Value)
		if p.HostIP != "" && p.HostIP != "0.0.0.0" {
			host = p.HostIP + ":" + host
		}
		for _, proto := range []string{"tcp", "udp"} {
			out = append(out, fmt.Sprintf("%s:%d/%s", host, to, proto))
		}
	}
	return out, nil
}

// portMap maps the task's port labels to the ports inside the sandbox, for
// the NOMAD_PORT_* variables of services that advertise the driver's
// address.
func portMap(cfg *drivers.TaskConfig, labels []string) map[string]int {
	if cfg.Resources == nil || cfg.Resources.Ports == nil {
		return nil
	}
	m := map[string]int{}
	for _, label := range labels {
		if p, ok := cfg.Resources.Ports.Get(label); ok {
			to := p.To
			if to <= 0 {
				to = p.Value
			}
			m[label] = to
		}
	}
	return m
}

// envList turns an environment map into sorted KEY=VALUE entries.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// sandboxName is a readable unique name: job, task and the task's
// instance id.
func sandboxName(cfg *drivers.TaskConfig) string {
	inst := cfg.ID
	if i := strings.LastIndexByte(inst, '/'); i >= 0 {
		inst = inst[i+1:]
	}
	name := fmt.Sprintf("nomad-%s-%s-%s", cfg.JobName, cfg.Name, inst)
	clean := []rune(name)
	for i, r := range clean {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			clean[i] = '-'
		}
	}
	return string(clean)
}

// allowedDirs joins the plugin's allowed host paths with a task's trusted
// directories.
func allowedDirs(base []string, cfg *drivers.TaskConfig) []string {
	dirs := slices.Clone(base)
	for _, d := range trustedDirs(cfg) {
		if d != "" {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}
