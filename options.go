package sbx

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// Options describe a sandbox. The same type is the body of the REST
// create (POST /v1/sandboxes), the "spec" of a sandbox's record on disk
// and in `sbx inspect`, and what the CLI's flags fill in. The zero value
// of every field means the default.
//
// A new option is one field here, its handling in the sandbox package (or
// in isolate, for what the container gets), its flag in cmd/sbx and a line
// in the docs: docs/contributing.md lists the files.
type Options struct {
	// Name is an optional unique name; every operation accepts it instead
	// of the id.
	Name string `json:"name,omitempty"`
	// Image is the image reference to run. Exactly one of Image and
	// Rootfs is set for Create; with neither, Run uses host mode (the
	// host's system directories read-only, local only).
	Image string `json:"image,omitempty"`
	// Rootfs is a host directory used read-only as the image instead; it
	// is never modified. A server allows only directories its Policy
	// names.
	Rootfs string `json:"rootfs,omitempty"`
	// Pull says when Image is pulled: "missing" (the default), "always"
	// or "never".
	Pull string `json:"pull,omitempty"`
	// Cmd is the sandbox's command. For Run it is the command to run
	// (replacing the image's Cmd). For Create it is the sandbox's main
	// command, started once the sandbox is ready (and again by Start):
	// exec'd directly by its executor, supervised, its output kept for
	// Logs, its end reported by Wait and sent signals by Signal (see
	// Sandbox.Cmd); empty starts nothing.
	Cmd []string `json:"cmd,omitempty"`
	// AutoRemove removes the sandbox once its main command (Cmd) has
	// ended for good, or the sandbox was stopped, as docker run --rm
	// does. The host process that holds the sandbox's events (sbx serve)
	// does it, or the CLI's background `sbx auto-remove` process; sbx gc
	// removes those it finds stopped. It needs Cmd.
	AutoRemove bool `json:"auto_remove,omitempty"`
	// Restart is the main command's restart policy, as docker run
	// --restart: see RestartPolicy. It needs Cmd.
	Restart RestartPolicy `json:"restart,omitzero"`
	// Env is KEY=VALUE pairs added to the image's environment for every
	// command run in the sandbox.
	Env []string `json:"env,omitempty"`
	// Workdir is the default working directory of commands (absolute).
	Workdir string `json:"workdir,omitempty"`
	// User is the default user of commands: a name, UID, name:group or
	// UID:GID, resolved in the sandbox's /etc/passwd. Empty means the
	// image's user, or root.
	User string `json:"user,omitempty"`
	// Hostname of the sandbox; defaults to its short id.
	Hostname string `json:"hostname,omitempty"`
	// Limits on resources.
	Limits Limits `json:"limits,omitzero"`
	// Ulimits set resource limits (setrlimit) of every process of the
	// sandbox, as docker's --ulimit does; the others are inherited from
	// sbx. A hard limit above sbx's own needs CAP_SYS_RESOURCE.
	Ulimits []Ulimit `json:"ulimits,omitempty"`
	// Network is "none" (default: only loopback), "host" (the host's
	// network, when Policy allows it) or "bridge" (a veth on sbx0 with
	// NAT). Publish, Egress, AllowHostPorts and DNS apply to bridge mode,
	// in the syntax of the CLI flags: "8080:80", "127.0.0.1:8080:80/udp"
	// (see docs/network.md).
	Network        string   `json:"network,omitempty"`
	Publish        []string `json:"publish,omitempty"`
	Egress         string   `json:"egress,omitempty"`
	AllowHostPorts []string `json:"allow_host_ports,omitempty"`
	DNS            []string `json:"dns,omitempty"`
	// PublishAll publishes every port the image exposes (its config's
	// ExposedPorts) on a free host port, as docker run -P does (bridge
	// mode); a Publish entry for the same container port takes its place.
	PublishAll bool `json:"publish_all,omitempty"`
	// ExtraHosts are NAME:IP entries added to the sandbox's /etc/hosts,
	// as docker's --add-host adds them.
	ExtraHosts []string `json:"extra_hosts,omitempty"`
	// ReadonlyRootfs makes the root read-only (volumes and tmpfs mounts
	// stay writable).
	ReadonlyRootfs bool `json:"readonly_rootfs,omitempty"`
	// Volumes are host directories mounted into the sandbox.
	Volumes []Volume `json:"volumes,omitempty"`
	// Tmpfs are empty in-memory file systems mounted into the sandbox.
	Tmpfs []Tmpfs `json:"tmpfs,omitempty"`
	// DiskBacking says where the writable layer lives: "memory" (the
	// default: a tmpfs of Limits.DiskBytes whose pages count toward
	// Limits.MemoryBytes) or "disk" (a directory under the host's state
	// root, for jobs that write more than memory should hold; not capped
	// by Limits.DiskBytes, it can fill the state root's file system, and
	// is removed with the sandbox).
	DiskBacking string `json:"disk_backing,omitempty"`
	// ShmSizeBytes sizes /dev/shm, a tmpfs whose pages count toward the
	// memory limit (default 64 MiB), as docker's --shm-size. In JSON a
	// number or a string with a unit ("256m").
	ShmSizeBytes int64 `json:"shm_size_bytes,omitempty"`
	// CapAdd and CapDrop adjust Docker's default capability set ("ALL"
	// works).
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// Seccomp is "default" (Docker's profile), "unconfined" or the path of
	// a Docker or OCI JSON profile.
	Seccomp string `json:"seccomp,omitempty"`
	// UserNS is "private" (a user namespace of its own: root in the
	// sandbox is an unprivileged host id range leased to it, for files and
	// for every per-user kernel limit; the default with an image or a root
	// directory) or "host" (the host's; the default and the only mode of
	// host mode). docs/security.md says what each gives.
	UserNS string `json:"userns,omitempty"`
	// Labels are free key=value metadata; Filter selects by them.
	Labels map[string]string `json:"labels,omitempty"`
	// TTL removes the sandbox this long after its creation; zero keeps it
	// until removed. In JSON it is a duration string ("2h0m0s").
	TTL time.Duration `json:"-"`
	// IdleTimeout checkpoints the sandbox to disk once nobody has used it
	// for this long (no exec, attach, session, file or port-forward call;
	// docs/snapshots.md), which frees its processes' memory; the next such
	// call restores it first. Zero never does. In JSON it is a duration
	// string, like TTL.
	IdleTimeout time.Duration `json:"-"`
	// Lease is an owner lease: the sandbox is removed, as at the end of
	// its TTL, once this long passed without a Renew (from the end of its
	// create, then from the latest renewal), so that a creator that dies (a
	// crashed program, a lost connection) leaves nothing running. The Go
	// client (server/client) renews the leases of the sandboxes it created
	// in the background until they are removed or it closes; with a Host
	// (whose Create may serve a REST server's clients), the owner runs
	// KeepLease itself, and REST callers POST .../renew. Zero: no lease.
	// In JSON it is a duration string, like TTL.
	Lease time.Duration `json:"-"`
	// EgressPolicy is the text of an egress policy file (YAML or JSON,
	// docs/network.md): allow and deny entries, per-host L7 rules and
	// secret bindings; bridge mode, instead of Egress.
	EgressPolicy string `json:"egress_policy,omitempty"`
	// Secrets are values the sandbox uses without holding them: its
	// environment gets placeholders, swapped for the values by the
	// egress proxy on requests to the secrets' hosts (bridge mode; see
	// Secret). The record keeps them without their values.
	Secrets []Secret `json:"secrets,omitempty"`
}

// RestartPolicy says when the sandbox's executor runs the main command
// again after it exited, as docker's restart policies do: Name is "no"
// (or empty: never), "on-failure" (after a non-zero exit or a signal, at
// most MaxRetries times when that is above 0), "always" or
// "unless-stopped" (after any exit). The restart waits a back-off that
// starts at 100 ms and doubles up to 10 s, back to 100 ms after a run of
// 10 s or more. Stop ends the command for good (no restart); Start runs
// it again with a fresh count. The sandbox is what docker's container is
// to its daemon, and no sbx process stops it when it restarts, so always
// and unless-stopped act the same.
type RestartPolicy struct {
	Name       string `json:"name,omitempty"`
	MaxRetries int    `json:"max_retries,omitempty"`
}

// The restart policies of RestartPolicy.Name.
const (
	RestartNo            = "no"
	RestartOnFailure     = "on-failure"
	RestartAlways        = "always"
	RestartUnlessStopped = "unless-stopped"
)

// Restarts reports whether the policy restarts the command at all.
func (p RestartPolicy) Restarts() bool {
	return p.Name != "" && p.Name != RestartNo
}

// String is the policy as docker's --restart writes it
// ("on-failure:3").
func (p RestartPolicy) String() string {
	switch {
	case p.Name == "":
		return RestartNo
	case p.MaxRetries > 0:
		return fmt.Sprintf("%s:%d", p.Name, p.MaxRetries)
	}
	return p.Name
}

// ParseRestartPolicy reads docker's --restart value: no, on-failure[:N],
// always or unless-stopped. The error wraps ErrInvalid.
func ParseRestartPolicy(s string) (RestartPolicy, error) {
	name, max, hasMax := strings.Cut(s, ":")
	p := RestartPolicy{Name: name}
	if hasMax {
		n, err := strconv.Atoi(max)
		if err != nil || n < 0 || name != RestartOnFailure {
			return p, fmt.Errorf("%w: restart policy %q: only on-failure takes a count (on-failure:3)", ErrInvalid, s)
		}
		p.MaxRetries = n
	}
	if err := p.validate(); err != nil {
		return p, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return p, nil
}

func (p RestartPolicy) validate() error {
	switch p.Name {
	case "", RestartNo, RestartOnFailure, RestartAlways, RestartUnlessStopped:
	default:
		return fmt.Errorf("restart policy %q: use no, on-failure[:N], always or unless-stopped", p.Name)
	}
	if p.MaxRetries < 0 || (p.MaxRetries > 0 && p.Name != RestartOnFailure) {
		return fmt.Errorf("restart policy %s: a maximum retry count goes only with on-failure, and is not negative", p.Name)
	}
	return nil
}

// MinLease is the shortest Options.Lease: a renewal must have time to
// arrive.
const MinLease = time.Second

// ExpiryAt is when a sandbox created at created with o expires if its
// lease (if any) is not renewed after renewed: the earlier of its TTL's
// end and renewed+Lease; zero when neither is set.
func (o *Options) ExpiryAt(created, renewed time.Time) time.Time {
	var at time.Time
	if o.TTL > 0 {
		at = created.Add(o.TTL)
	}
	if o.Lease > 0 {
		if l := renewed.Add(o.Lease); at.IsZero() || l.Before(at) {
			at = l
		}
	}
	return at
}

// optionsJSON is Options without its methods, for the JSON codec.
type optionsJSON Options

// MarshalJSON writes TTL, IdleTimeout and Lease as duration strings.
func (o Options) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		optionsJSON
		TTL         Duration `json:"ttl,omitempty"`
		IdleTimeout Duration `json:"idle_timeout,omitempty"`
		Lease       Duration `json:"lease,omitempty"`
	}{optionsJSON(o), Duration(o.TTL), Duration(o.IdleTimeout), Duration(o.Lease)})
}

// UnmarshalJSON reads Options, refusing unknown fields; ttl,
// idle_timeout and lease are duration strings or numbers of seconds,
// shm_size_bytes a number or a string with a unit.
func (o *Options) UnmarshalJSON(data []byte) error {
	var v struct {
		optionsJSON
		TTL          Duration `json:"ttl,omitempty"`
		IdleTimeout  Duration `json:"idle_timeout,omitempty"`
		Lease        Duration `json:"lease,omitempty"`
		ShmSizeBytes Size     `json:"shm_size_bytes,omitempty"`
	}
	if err := strictUnmarshal(data, &v); err != nil {
		return err
	}
	*o = Options(v.optionsJSON)
	o.ShmSizeBytes = int64(v.ShmSizeBytes)
	o.TTL = time.Duration(v.TTL)
	o.IdleTimeout = time.Duration(v.IdleTimeout)
	o.Lease = time.Duration(v.Lease)
	return nil
}

// Limits are the resource limits of a sandbox. Zero means unlimited (or
// the host's default). In JSON the sizes are memory_bytes and disk_bytes;
// requests may give them as strings with a unit ("512m").
type Limits struct {
	// MemoryBytes caps the sandbox's memory; swap is disabled. The
	// writable layer (see DiskBytes) counts toward it.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUs is a CPU quota in CPUs, e.g. 0.5.
	CPUs float64 `json:"cpus,omitempty"`
	// Pids caps the number of processes (sbx's own init gets a fixed
	// allowance on top).
	Pids int64 `json:"pids,omitempty"`
	// DiskBytes caps the writable layer, a tmpfs in memory: writes beyond
	// it fail with ENOSPC inside the sandbox. The default is MemoryBytes
	// when set.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// UnmarshalJSON reads the byte limits as numbers or strings with a unit.
func (l *Limits) UnmarshalJSON(data []byte) error {
	var v struct {
		MemoryBytes Size    `json:"memory_bytes"`
		CPUs        float64 `json:"cpus"`
		Pids        int64   `json:"pids"`
		DiskBytes   Size    `json:"disk_bytes"`
	}
	if err := strictUnmarshal(data, &v); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	*l = Limits{MemoryBytes: int64(v.MemoryBytes), CPUs: v.CPUs, Pids: v.Pids, DiskBytes: int64(v.DiskBytes)}
	return nil
}

// Volume mounts the host directory HostPath at Path inside the sandbox.
// Files keep their host ownership. In a private user namespace the
// sandbox's ids are its leased host range there too: the files it creates
// belong to that range on the host, and host files outside it (root's
// included) show as the overflow id (nobody) and are never its own. IDMap
// "host" (VolumeIDMapHost) id-maps the volume back to the host's ids
// instead: root in the sandbox then reads and writes the volume as host
// uid 0 (docs/security.md warns against it for untrusted code). Without a
// private user namespace IDMap changes nothing.
//
// Name mounts the named volume of that name instead (Volumes; made when
// missing), and the host fills in HostPath (its directory) and IDMap
// "host": a volume outlives the sandboxes, whose private id ranges
// differ, so its files carry the ids the sandboxes see, as in docker.
type Volume struct {
	Name     string `json:"name,omitempty"`
	HostPath string `json:"host_path,omitempty"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
	IDMap    string `json:"idmap,omitempty"`
}

// VolumeIDMapHost is Volume.IDMap for a volume id-mapped back to the
// host's ids in a private user namespace.
const VolumeIDMapHost = "host"

// Tmpfs mounts an empty in-memory file system at Path. In JSON the size is
// size_bytes, a number or a string with a unit.
type Tmpfs struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// UnmarshalJSON reads size_bytes as a number or a string with a unit.
func (t *Tmpfs) UnmarshalJSON(data []byte) error {
	var v struct {
		Path      string `json:"path"`
		SizeBytes Size   `json:"size_bytes"`
	}
	if err := strictUnmarshal(data, &v); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	*t = Tmpfs{Path: v.Path, SizeBytes: int64(v.SizeBytes)}
	return nil
}

// Pull policies of Options.Pull.
const (
	PullMissing = "missing"
	PullAlways  = "always"
	PullNever   = "never"
)

// Network modes of Options.Network.
const (
	NetworkNone   = "none"
	NetworkHost   = "host"
	NetworkBridge = "bridge"
)

// Places of the writable layer (Options.DiskBacking).
const (
	DiskBackingMemory = "memory"
	DiskBackingDisk   = "disk"
)

// User namespace modes of Options.UserNS.
const (
	UserNSHost    = "host"
	UserNSPrivate = "private"
)

// DefaultUserNS is the user namespace mode of o when it names none:
// private for a sandbox with an image or a root directory, host for host
// mode (which shares the host's files).
func DefaultUserNS(o *Options) string {
	if o.Image == "" && o.Rootfs == "" {
		return UserNSHost
	}
	return UserNSPrivate
}

// Validate checks what needs no host: paths, names, limits, the form of
// the environment and labels. It does not check that an image exists, a
// host path is allowed or the network flags parse; Create does that too.
// Errors wrap ErrInvalid.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Image != "" && o.Rootfs != "" {
		bad("give an image or a root directory (--rootfs), not both")
	}
	if o.Rootfs != "" && !path.IsAbs(o.Rootfs) {
		bad("root directory %q must be an absolute path", o.Rootfs)
	}
	switch o.Pull {
	case "", PullMissing, PullAlways, PullNever:
	default:
		bad("invalid pull policy %q: use missing, always or never", o.Pull)
	}
	l := o.Limits
	if l.MemoryBytes < 0 || l.Pids < 0 || l.DiskBytes < 0 || l.CPUs < 0 {
		bad("limits must not be negative")
	}
	if l.MemoryBytes > 0 && l.MemoryBytes < 6<<20 {
		bad("memory limit %d is too small: use at least 6 MiB", l.MemoryBytes)
	}
	if l.DiskBytes > 0 && l.DiskBytes < 1<<20 {
		bad("disk limit %d is too small: use at least 1 MiB", l.DiskBytes)
	}
	switch o.Network {
	case "", NetworkNone, NetworkHost, NetworkBridge:
	default:
		bad("network %q: use none, host or bridge", o.Network)
	}
	switch o.DiskBacking {
	case "", DiskBackingMemory, DiskBackingDisk:
	default:
		bad("disk backing %q: use memory or disk", o.DiskBacking)
	}
	if o.DiskBacking == DiskBackingDisk && o.Image == "" && o.Rootfs == "" {
		bad("disk backing needs an image or a root directory: host mode's writable layer is a tmpfs")
	}
	switch o.UserNS {
	case "", UserNSHost, UserNSPrivate:
	default:
		bad("user namespace %q: use private or host", o.UserNS)
	}
	if o.UserNS == UserNSPrivate && o.Image == "" && o.Rootfs == "" {
		bad("a private user namespace needs an image or a root directory: host mode shares the host's files")
	}
	if o.Workdir != "" && !path.IsAbs(o.Workdir) {
		bad("working directory %q must be absolute", o.Workdir)
	}
	for _, e := range o.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsRune(e, 0) {
			bad("environment entry %q: want KEY=VALUE", e)
		}
	}
	errs = append(errs, validateSecrets(o.Secrets, o.Env)...)
	if o.EgressPolicy != "" && (o.Network != NetworkBridge || o.Egress != "") {
		bad("an egress policy file needs bridge networking and takes the place of --egress")
	}
	if len(o.Secrets) > 0 && o.Network != NetworkBridge {
		bad("secrets need bridge networking (--network bridge), where the egress proxy swaps them in")
	}
	for _, a := range o.Cmd {
		if strings.ContainsRune(a, 0) {
			bad("cmd: arguments must not contain NUL bytes")
			break
		}
	}
	for _, v := range o.Volumes {
		if v.Name != "" {
			if err := checkVolumeName(v.Name); err != nil {
				errs = append(errs, err)
			}
			if !path.IsAbs(v.Path) {
				bad("volume %s:%s: the path in the sandbox must be absolute", v.Name, v.Path)
			}
		} else if !path.IsAbs(v.HostPath) || !path.IsAbs(v.Path) {
			bad("volume %s:%s: both paths must be absolute (or name a volume)", v.HostPath, v.Path)
		}
		if reservedPath(v.Path) {
			bad("volume target %q is reserved", v.Path)
		}
		if v.IDMap != "" && v.IDMap != VolumeIDMapHost {
			bad("volume %s:%s: idmap %q: use host (or leave it out)", v.HostPath, v.Path, v.IDMap)
		}
	}
	for _, t := range o.Tmpfs {
		if !path.IsAbs(t.Path) || reservedPath(t.Path) {
			bad("tmpfs target %q must be an absolute path other than / and /.sbx", t.Path)
		}
		if t.SizeBytes < 0 {
			bad("tmpfs %s: negative size", t.Path)
		}
	}
	for k := range o.Labels {
		if k == "" || strings.ContainsAny(k, "=\n") {
			bad("label key %q must be non-empty without '=' or newlines", k)
		}
	}
	if o.TTL < 0 {
		bad("ttl must not be negative")
	}
	if o.IdleTimeout < 0 {
		bad("idle_timeout must not be negative")
	}
	if o.Lease < 0 || (o.Lease > 0 && o.Lease < MinLease) {
		bad("lease must be at least %s (or 0: none)", MinLease)
	}
	if o.IdleTimeout > 0 && len(o.Publish) > 0 {
		bad("idle_timeout does not go with publish: traffic to a published port is not watched, and would reach a sandbox checkpointed to disk; reach its ports through the server's port connection (GET /v1/sandboxes/{id}/ports/{port}/connect), which wakes it")
	}
	errs = append(errs, validateContainerExtras(o)...)
	if err := o.Restart.validate(); err != nil {
		errs = append(errs, err)
	} else if o.Restart.Restarts() && len(o.Cmd) == 0 {
		bad("restart policy %s needs a main command (cmd)", o.Restart)
	}
	if o.AutoRemove && o.Restart.Restarts() {
		bad("auto_remove does not go with restart policy %s (as docker's --rm and --restart): the sandbox is removed when its command ends", o.Restart)
	}
	if o.AutoRemove && len(o.Cmd) == 0 {
		bad("auto_remove needs a main command (cmd): the sandbox is removed when it ends")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// reservedPath reports whether p is / or under /.sbx, where sbx mounts its
// own helpers.
func reservedPath(p string) bool {
	c := path.Clean(p)
	return c == "/" || c == "/.sbx" || strings.HasPrefix(c, "/.sbx/")
}
