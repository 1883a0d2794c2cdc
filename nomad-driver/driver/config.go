package driver

import (
	"fmt"
	"path"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"

	"github.com/sbxrun/sbx"
)

// PluginConfig is the agent's `plugin "nomad-driver-sbx" { config { ... } }`
// block: where sbx keeps its state on this node and what jobs may ask for.
type PluginConfig struct {
	// Root is sbx's persistent state (images, sandboxes).
	Root string `codec:"root"`
	// RunRoot is sbx's runtime state (sockets, mounts).
	RunRoot string `codec:"run_root"`
	// SbxBinary is a static sbx (or sbx-executor) binary run inside every
	// sandbox as its executor; empty uses the one embedded in the plugin.
	SbxBinary string `codec:"sbx_binary"`
	// AllowedHostPaths are the host directories a job's volumes may come
	// from (Nomad's own alloc, local and secrets directories are always
	// mounted).
	AllowedHostPaths []string `codec:"allowed_host_paths"`
	// AllowHostNetwork lets jobs use network = "host".
	AllowHostNetwork bool `codec:"allow_host_network"`
	// AllowPrivileged lets jobs add capabilities and change the seccomp
	// profile.
	AllowPrivileged bool `codec:"allow_privileged"`
	// PullPolicy is when images are pulled: missing, always or never.
	PullPolicy string `codec:"pull_policy"`
	// InsecureRegistries are registries (host[:port]) reached over plain
	// HTTP.
	InsecureRegistries []string `codec:"insecure_registries"`
	// GCInterval is how often sbx's garbage collection runs ("5m"; "0"
	// turns it off).
	GCInterval string `codec:"gc_interval"`
	// PidsLimit is the default process limit of a task; 0 is none.
	PidsLimit int64 `codec:"pids_limit"`
	// HostNetNS is the network namespace (a path such as
	// /run/netns/NAME) that plays the host for bridge networking: the
	// bridge, NAT rules and published ports live there. Empty is the
	// plugin's own.
	HostNetNS string `codec:"host_netns"`
}

// configSpec is the HCL schema of PluginConfig.
var configSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"root":                hclspec.NewDefault(hclspec.NewAttr("root", "string", false), hclspec.NewLiteral(`"/var/lib/sbx"`)),
	"run_root":            hclspec.NewDefault(hclspec.NewAttr("run_root", "string", false), hclspec.NewLiteral(`"/run/sbx"`)),
	"sbx_binary":          hclspec.NewAttr("sbx_binary", "string", false),
	"allowed_host_paths":  hclspec.NewAttr("allowed_host_paths", "list(string)", false),
	"allow_host_network":  hclspec.NewDefault(hclspec.NewAttr("allow_host_network", "bool", false), hclspec.NewLiteral("false")),
	"allow_privileged":    hclspec.NewDefault(hclspec.NewAttr("allow_privileged", "bool", false), hclspec.NewLiteral("false")),
	"pull_policy":         hclspec.NewDefault(hclspec.NewAttr("pull_policy", "string", false), hclspec.NewLiteral(`"missing"`)),
	"insecure_registries": hclspec.NewAttr("insecure_registries", "list(string)", false),
	"gc_interval":         hclspec.NewDefault(hclspec.NewAttr("gc_interval", "string", false), hclspec.NewLiteral(`"5m"`)),
	"pids_limit":          hclspec.NewAttr("pids_limit", "number", false),
	"host_netns":          hclspec.NewAttr("host_netns", "string", false),
})

// gcInterval parses GCInterval; zero means no periodic collection.
func (c *PluginConfig) gcInterval() (time.Duration, error) {
	if c.GCInterval == "" || c.GCInterval == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.GCInterval)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("gc_interval %q: want a duration such as \"5m\", or \"0\" to turn it off", c.GCInterval)
	}
	return d, nil
}

// validate checks the plugin configuration; the agent refuses to load the
// plugin with its error.
func (c *PluginConfig) validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for name, p := range map[string]string{"root": c.Root, "run_root": c.RunRoot} {
		if !path.IsAbs(p) {
			bad("%s %q must be an absolute path", name, p)
		}
	}
	if c.HostNetNS != "" && !path.IsAbs(c.HostNetNS) {
		bad("host_netns %q must be an absolute path", c.HostNetNS)
	}
	if c.SbxBinary != "" && !path.IsAbs(c.SbxBinary) {
		bad("sbx_binary %q must be an absolute path", c.SbxBinary)
	}
	for _, p := range c.AllowedHostPaths {
		if !path.IsAbs(p) {
			bad("allowed_host_paths: %q must be an absolute path", p)
		}
	}
	switch c.PullPolicy {
	case "missing", "always", "never":
	default:
		bad("pull_policy %q: use missing, always or never", c.PullPolicy)
	}
	if _, err := c.gcInterval(); err != nil {
		bad("%v", err)
	}
	if c.PidsLimit < 0 {
		bad("pids_limit must not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("sbx plugin config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// TaskConfig is a task's `config { ... }` block.
type TaskConfig struct {
	// Image is the image reference, pulled into the node's cache per the
	// plugin's pull_policy, or the name given to ImagePath's import.
	Image string `codec:"image"`
	// ImagePath imports the image from this host path (an OCI layout, an
	// OCI or docker archive, or a root file system tarball) when Image is
	// not cached yet. The path must be under allowed_host_paths.
	ImagePath string `codec:"image_path"`
	// Command and Args replace the image's Cmd; Entrypoint replaces its
	// Entrypoint.
	Command    string   `codec:"command"`
	Args       []string `codec:"args"`
	Entrypoint []string `codec:"entrypoint"`
	// Env is added to the task's environment (over Nomad's env block).
	Env map[string]string `codec:"env"`
	// Workdir is the working directory of the command (absolute).
	Workdir string `codec:"workdir"`
	// User runs the command as this user ("name", "uid", "uid:gid"); it
	// wins over the task's user, which wins over the image's.
	User string `codec:"user"`
	// Network is none (default), host or bridge.
	Network string `codec:"network"`
	// UserNS is private (sbx's default: the task's root is an
	// unprivileged host id range) or host (the host's ids).
	UserNS string `codec:"userns"`
	// Ports are port labels of the group's network block published to the
	// sandbox (bridge mode): the host port Nomad allocated forwards to the
	// label's `to` port, or to the same port.
	Ports []string `codec:"ports"`
	// Egress is the bridge's egress policy ("default", "none" or a list of
	// CIDRs, as `sbx create --egress`).
	Egress string `codec:"egress"`
	// Seccomp is "default", "unconfined" or a profile path.
	Seccomp string   `codec:"seccomp"`
	CapAdd  []string `codec:"cap_add"`
	CapDrop []string `codec:"cap_drop"`
	// ReadOnly makes the image's root read-only.
	ReadOnly bool `codec:"read_only"`
	// Disk caps the writable layer ("512m"); it lives in memory and
	// counts toward the memory limit.
	Disk string `codec:"disk"`
	// Volumes are "host:container[:ro]" binds of host directories under
	// allowed_host_paths.
	Volumes []string `codec:"volumes"`
	// Tmpfs are "path[:size]" in-memory mounts.
	Tmpfs []string `codec:"tmpfs"`
	// Labels are added to the sandbox's labels.
	Labels map[string]string `codec:"labels"`
	// PidsLimit caps the number of processes (default: the plugin's).
	PidsLimit int64 `codec:"pids_limit"`
	// CPUHardLimit caps CPU time at the task's cpu share of the node
	// (default true); false leaves only the relative weight.
	CPUHardLimit *bool `codec:"cpu_hard_limit"`
	// Pool names a warm pool of the node's sbx root: the task's sandbox
	// is one of its idle members when one is ready (a cold start with the
	// same options otherwise). What a sandbox fixes at start (the pool's
	// key, sbx.OptionClasses) comes from the pool; the task may set it only
	// to the pool's values. The rest, task directories included, is
	// applied at the claim.
	Pool string `codec:"pool"`
}

// taskConfigSpec is the HCL schema of TaskConfig.
var taskConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"image":          hclspec.NewAttr("image", "string", true),
	"image_path":     hclspec.NewAttr("image_path", "string", false),
	"command":        hclspec.NewAttr("command", "string", false),
	"args":           hclspec.NewAttr("args", "list(string)", false),
	"entrypoint":     hclspec.NewAttr("entrypoint", "list(string)", false),
	"env":            hclspec.NewAttr("env", "map(string)", false),
	"workdir":        hclspec.NewAttr("workdir", "string", false),
	"user":           hclspec.NewAttr("user", "string", false),
	"network":        hclspec.NewDefault(hclspec.NewAttr("network", "string", false), hclspec.NewLiteral(`"none"`)),
	"userns":         hclspec.NewAttr("userns", "string", false),
	"ports":          hclspec.NewAttr("ports", "list(string)", false),
	"egress":         hclspec.NewAttr("egress", "string", false),
	"seccomp":        hclspec.NewAttr("seccomp", "string", false),
	"cap_add":        hclspec.NewAttr("cap_add", "list(string)", false),
	"cap_drop":       hclspec.NewAttr("cap_drop", "list(string)", false),
	"read_only":      hclspec.NewAttr("read_only", "bool", false),
	"disk":           hclspec.NewAttr("disk", "string", false),
	"volumes":        hclspec.NewAttr("volumes", "list(string)", false),
	"tmpfs":          hclspec.NewAttr("tmpfs", "list(string)", false),
	"labels":         hclspec.NewAttr("labels", "map(string)", false),
	"pids_limit":     hclspec.NewAttr("pids_limit", "number", false),
	"cpu_hard_limit": hclspec.NewAttr("cpu_hard_limit", "bool", false),
	"pool":           hclspec.NewAttr("pool", "string", false),
})

// Volume is one parsed entry of TaskConfig.Volumes.
type Volume struct {
	HostPath, Path string
	ReadOnly       bool
}

// Tmpfs is one parsed entry of TaskConfig.Tmpfs.
type Tmpfs struct {
	Path      string
	SizeBytes int64
}

// validate checks what needs no host; StartTask fails with its error and
// creates nothing.
func (tc *TaskConfig) validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if strings.TrimSpace(tc.Image) == "" {
		bad("image is required")
	}
	if tc.ImagePath != "" && !path.IsAbs(tc.ImagePath) {
		bad("image_path %q must be an absolute path", tc.ImagePath)
	}
	if tc.Workdir != "" && !path.IsAbs(tc.Workdir) {
		bad("workdir %q must be an absolute path", tc.Workdir)
	}
	switch tc.Network {
	case "", "none", "host", "bridge":
	default:
		bad("network %q: use none, host or bridge", tc.Network)
	}
	switch tc.UserNS {
	case "", sbx.UserNSPrivate, sbx.UserNSHost:
	default:
		bad("userns %q: use private or host", tc.UserNS)
	}
	if len(tc.Ports) > 0 && tc.Network != "bridge" && tc.Pool == "" {
		bad("ports need network = \"bridge\" (with %q the sandbox has no ports of its own)", tc.networkOrNone())
	}
	if tc.Egress != "" && tc.Network != "bridge" && tc.Pool == "" {
		bad("egress applies to network = \"bridge\" only")
	}
	if _, err := tc.diskBytes(); err != nil {
		bad("%v", err)
	}
	if _, err := tc.volumes(); err != nil {
		bad("%v", err)
	}
	if _, err := tc.tmpfs(); err != nil {
		bad("%v", err)
	}
	if tc.PidsLimit < 0 {
		bad("pids_limit must not be negative")
	}
	for k := range tc.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("env: name %q is not valid", k)
		}
	}
	if tc.Pool != "" {
		if err := sbx.ValidPoolName(tc.Pool); err != nil {
			bad("pool: %v", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sbx task config: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (tc *TaskConfig) networkOrNone() string {
	if tc.Network == "" {
		return "none"
	}
	return tc.Network
}

// diskBytes parses Disk ("512m", "1g", or bytes).
func (tc *TaskConfig) diskBytes() (int64, error) {
	if tc.Disk == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(tc.Disk)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("disk %q: want a size such as \"512m\"", tc.Disk)
	}
	return n, nil
}

// volumes parses Volumes.
func (tc *TaskConfig) volumes() ([]Volume, error) {
	var out []Volume
	for _, v := range tc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("volume %q: want host:container or host:container:ro", v)
		}
		vol := Volume{HostPath: parts[0], Path: parts[1]}
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				vol.ReadOnly = true
			case "rw":
			default:
				return nil, fmt.Errorf("volume %q: the mode must be ro or rw", v)
			}
		}
		if !path.IsAbs(vol.HostPath) || !path.IsAbs(vol.Path) {
			return nil, fmt.Errorf("volume %q: both paths must be absolute", v)
		}
		out = append(out, vol)
	}
	return out, nil
}

// tmpfs parses Tmpfs.
func (tc *TaskConfig) tmpfs() ([]Tmpfs, error) {
	var out []Tmpfs
	for _, s := range tc.Tmpfs {
		p, size, hasSize := strings.Cut(s, ":")
		t := Tmpfs{Path: p}
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("tmpfs %q: the path must be absolute", s)
		}
		if hasSize {
			n, err := units.RAMInBytes(size)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("tmpfs %q: want path:size with a size such as \"64m\"", s)
			}
			t.SizeBytes = n
		}
		out = append(out, t)
	}
	return out, nil
}
