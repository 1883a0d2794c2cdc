package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sbxrun/sbx/netns"
)

// Options describe a sandbox to create. The zero value of every field means
// the default.
type Options struct {
	// Name is an optional unique name; commands accept it instead of the id.
	Name string `json:"name,omitempty"`
	// Image is the image reference to run; exactly one of Image and Rootfs
	// is set.
	Image string `json:"image,omitempty"`
	// Rootfs is a host directory used (read-only) as the image instead.
	Rootfs string `json:"rootfs,omitempty"`
	// Env is KEY=VALUE pairs added to the image's environment for every
	// command run in the sandbox.
	Env []string `json:"env,omitempty"`
	// Workdir is the default working directory of commands.
	Workdir string `json:"workdir,omitempty"`
	// User is the default user of commands: "UID[:GID]" or a name from the
	// image's /etc/passwd. Empty means the image's user, or root.
	User string `json:"user,omitempty"`
	// Hostname of the sandbox; defaults to the short id.
	Hostname string `json:"hostname,omitempty"`
	// Limits on resources.
	Limits Limits `json:"limits"`
	// Network is "none" (default: only loopback), "host" or "bridge" (a
	// veth on sbx0 with NAT); Publish, Egress, AllowHostPorts and DNS
	// apply to bridge mode, in the syntax of the CLI flags (see
	// docs/network.md).
	Network        string   `json:"network,omitempty"`
	Publish        []string `json:"publish,omitempty"`
	Egress         string   `json:"egress,omitempty"`
	AllowHostPorts []string `json:"allow_host_ports,omitempty"`
	DNS            []string `json:"dns,omitempty"`
	// ReadonlyRootfs makes the root read-only (volumes and tmpfs stay
	// writable).
	ReadonlyRootfs bool `json:"readonly_rootfs,omitempty"`
	// Volumes are host directories mounted into the sandbox.
	Volumes []Volume `json:"volumes,omitempty"`
	// Tmpfs are in-memory file systems mounted into the sandbox.
	Tmpfs []Tmpfs `json:"tmpfs,omitempty"`
	// CapAdd and CapDrop adjust the default capability set.
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// Seccomp is "default", "unconfined" or the path of a profile.
	Seccomp string `json:"seccomp,omitempty"`
	// Labels are free key=value metadata, used to filter listings.
	Labels map[string]string `json:"labels,omitempty"`
	// TTL removes the sandbox this long after its creation; zero keeps it
	// until removed.
	TTL time.Duration `json:"ttl,omitempty"`
}

// Limits are the resource limits of a sandbox. Zero means unlimited (or the
// Manager's default).
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	// DiskBytes caps the writable layer: writes beyond it fail with ENOSPC
	// inside the sandbox.
	DiskBytes int64 `json:"disk_bytes,omitempty"`
}

// Volume mounts HostPath at Path inside the sandbox.
type Volume struct {
	HostPath string `json:"host_path"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Tmpfs mounts an empty in-memory file system at Path.
type Tmpfs struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// Status is where a sandbox is in its life.
type Status string

// The statuses of a sandbox.
const (
	// StatusCreating: a create is under way (or its process died; gc
	// then undoes it).
	StatusCreating Status = "creating"
	// StatusRunning: the executor answers.
	StatusRunning Status = "running"
	// StatusPaused: every process is frozen.
	StatusPaused Status = "paused"
	// StatusStopped: PID 1 exited; the root file system is kept until rm.
	StatusStopped Status = "stopped"
	// StatusRemoving: a remove is under way (or died; gc finishes it).
	StatusRemoving Status = "removing"
	// StatusUnreadable: the record on disk is damaged, so what the
	// sandbox is cannot be known. It is left as it is (running, if it
	// was); rm -f removes it deliberately.
	StatusUnreadable Status = "unreadable"
)

// Sandbox is the record of one sandbox, as stored on disk and returned by
// List and Inspect.
type Sandbox struct {
	ID      string  `json:"id"`
	Name    string  `json:"name,omitempty"`
	Status  Status  `json:"status"`
	Options Options `json:"spec"`
	// Image is what Options.Image resolved to.
	Image *ImageInfo `json:"image,omitempty"`
	// Pid is the host PID of the sandbox's PID 1 (the executor) while it
	// runs.
	Pid int `json:"pid,omitempty"`
	// PidStart is PID 1's start time (clock ticks after boot, from
	// /proc/PID/stat), so that a reused PID is not taken for it.
	PidStart uint64 `json:"pid_start,omitempty"`
	// Socket is the host path of the executor's unix socket.
	Socket string `json:"socket,omitempty"`
	// Network is the sandbox's network: mode, and in bridge mode its
	// address, gateway and published ports.
	Network *netns.Attachment `json:"network,omitempty"`
	// RootPath is the host path of the mounted root file system.
	RootPath string `json:"root_path,omitempty"`
	// ExitCode of PID 1 once stopped, if known.
	ExitCode *int `json:"exit_code,omitempty"`
	// Problem says what is wrong with a sandbox whose status is
	// unreadable, and what to do.
	Problem string `json:"problem,omitempty"`

	Created   time.Time  `json:"created"`
	Started   *time.Time `json:"started,omitempty"`
	Stopped   *time.Time `json:"stopped,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`

	// CreateTimings break down where the create's time went.
	CreateTimings *CreateTimings `json:"create_timings,omitempty"`

	// Resources are everything created on the host for the sandbox, in
	// creation order. Each is recorded before it is created, so removal
	// (and gc after a crash) can release exactly these.
	Resources []Resource `json:"resources"`
}

// CreateTimings are the durations of the steps of a create, in seconds:
// admission (limits, id, name, first record), the network (bridge mode:
// namespace, address, rules; FromPool when the namespace came ready from
// the pool), the root file system, the container start, and waiting for
// the executor's first answer.
type CreateTimings struct {
	AdmitS   float64 `json:"admit_s"`
	NetworkS float64 `json:"network_s"`
	FromPool bool    `json:"from_pool"`
	RootfsS  float64 `json:"rootfs_s"`
	StartS   float64 `json:"start_s"`
	ReadyS   float64 `json:"ready_s"`
	TotalS   float64 `json:"total_s"`
}

// networkOptions parses the network settings for netns.
func (o *Options) networkOptions(hostname string) (netns.AttachOptions, error) {
	return netns.ParseFlags(netns.Flags{Network: o.Network, Publish: o.Publish, Egress: o.Egress,
		AllowHostPorts: o.AllowHostPorts, DNS: o.DNS, Hostname: hostname})
}

// ImageInfo is the resolved image of a sandbox.
type ImageInfo struct {
	Ref    string   `json:"ref"`
	Digest string   `json:"digest,omitempty"`
	Layers []string `json:"layers"` // lowest first
	// Env, Workdir and User are the image's defaults for commands.
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
}

// ResourceKind says how a Resource is released.
type ResourceKind string

// The kinds of host resources a sandbox owns.
const (
	// ResourceRunDir is the sandbox's runtime directory (sockets, mount
	// points, libcontainer state); released by removing it.
	ResourceRunDir ResourceKind = "rundir"
	// ResourceRootfs is the mounted root (overlay over the image on a
	// size-capped tmpfs, plus volumes); released by unmounting.
	ResourceRootfs ResourceKind = "rootfs"
	// ResourceNetwork is the sandbox's network in bridge mode (lease,
	// namespace, veth, rules); released by detaching it.
	ResourceNetwork ResourceKind = "network"
	// ResourceContainer is the libcontainer container with its cgroups;
	// released by killing it and destroying its state and cgroups.
	ResourceContainer ResourceKind = "container"
)

// Resource is one thing created on the host for a sandbox.
type Resource struct {
	Kind ResourceKind `json:"kind"`
	// Path locates it: a directory, a mount point, a state directory.
	Path string `json:"path"`
	// ID names it where a path is not enough (the container id).
	ID string `json:"id,omitempty"`
}

// ShortID is the first 12 digits of the id, as shown by listings.
func (s *Sandbox) ShortID() string {
	if len(s.ID) > 12 {
		return s.ID[:12]
	}
	return s.ID
}

// Filter selects sandboxes in List. The zero Filter selects all.
type Filter struct {
	// Labels must all be present with these values.
	Labels map[string]string
	// Status, if set, must match.
	Status Status
	// Running selects only running and paused sandboxes (and those being
	// created).
	Running bool
}

// ParseLabelFilter parses "k=v" (or "k" for presence with any value) into
// f.Labels; it is the form of the CLI's --filter label=k=v.
func (f *Filter) ParseLabelFilter(s string) error {
	k, v, _ := strings.Cut(s, "=")
	if k == "" {
		return fmt.Errorf("%w: label filter %q: want key=value", ErrInvalid, s)
	}
	if f.Labels == nil {
		f.Labels = map[string]string{}
	}
	f.Labels[k] = v
	return nil
}

func (f Filter) match(sb *Sandbox) bool {
	if f.Status != "" && sb.Status != f.Status {
		return false
	}
	if f.Running && sb.Status != StatusRunning && sb.Status != StatusPaused && sb.Status != StatusCreating {
		return false
	}
	for k, v := range f.Labels {
		got, ok := sb.Options.Labels[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// validate checks options that need no host access and fills in defaults.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if (o.Image == "") == (o.Rootfs == "") {
		bad("give exactly one of an image and a root directory (--rootfs)")
	}
	if o.Rootfs != "" && !path.IsAbs(o.Rootfs) {
		bad("root directory %q must be an absolute path", o.Rootfs)
	}
	if o.Limits.MemoryBytes < 0 || o.Limits.Pids < 0 || o.Limits.DiskBytes < 0 || o.Limits.CPUs < 0 {
		bad("limits must not be negative")
	}
	if o.Limits.MemoryBytes > 0 && o.Limits.MemoryBytes < 6<<20 {
		bad("memory limit %d is too small: use at least 6 MiB", o.Limits.MemoryBytes)
	}
	if o.Limits.DiskBytes > 0 && o.Limits.DiskBytes < 1<<20 {
		bad("disk limit %d is too small: use at least 1 MiB", o.Limits.DiskBytes)
	}
	if o.Network == "" {
		o.Network = string(netns.ModeNone)
	}
	if _, err := o.networkOptions(""); err != nil {
		bad("%v", err)
	}
	if o.Workdir != "" && !path.IsAbs(o.Workdir) {
		bad("working directory %q must be absolute", o.Workdir)
	}
	for _, e := range o.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsRune(e, 0) {
			bad("environment entry %q: want KEY=VALUE", e)
		}
	}
	for _, v := range o.Volumes {
		if !path.IsAbs(v.HostPath) || !path.IsAbs(v.Path) {
			bad("volume %s:%s: both paths must be absolute", v.HostPath, v.Path)
		}
		if path.Clean(v.Path) == "/" || strings.HasPrefix(path.Clean(v.Path), "/.sbx") {
			bad("volume target %q is reserved", v.Path)
		}
	}
	for _, t := range o.Tmpfs {
		if !path.IsAbs(t.Path) || path.Clean(t.Path) == "/" || strings.HasPrefix(path.Clean(t.Path), "/.sbx") {
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
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}
