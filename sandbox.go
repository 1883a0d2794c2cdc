package sbx

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Status is where a sandbox is in its life.
type Status string

// The statuses of a sandbox.
const (
	// StatusCreating: a create is under way (or its process died; GC then
	// undoes it).
	StatusCreating Status = "creating"
	// StatusRunning: the executor answers.
	StatusRunning Status = "running"
	// StatusPaused: every process is frozen.
	StatusPaused Status = "paused"
	// StatusStopped: PID 1 exited; the root file system is kept until
	// Remove, and Start runs the sandbox again.
	StatusStopped Status = "stopped"
	// StatusRemoving: a remove is under way (or died; GC finishes it).
	StatusRemoving Status = "removing"
	// StatusUnreadable: the record on disk is damaged, so what the sandbox
	// is cannot be known; Sandbox.Problem says what and what to do. It is
	// left as it is (running, if it was); a forced Remove removes it and
	// everything a sandbox of its id can have made.
	StatusUnreadable Status = "unreadable"
	// StatusPooled: an idle member of a warm pool (Sandbox.Pool), started
	// and answering, that no user code has run in; a Create claims it.
	// No operation but Remove acts on it.
	StatusPooled Status = "pooled"
)

// The states a sandbox shows beside its status (Sandbox.State), in
// docker's words; a record's Status is never one of them.
const (
	// StatusExited is the state of a stopped sandbox, and of a running one
	// whose main command ended for good (CmdExit): docker calls both
	// exited. Filter.Status "exited" selects them.
	StatusExited Status = "exited"
	// StatusRestarting is the state of a running sandbox whose main
	// command exited and waits out its restart policy's back-off
	// (CmdRestarting). Filter.Status "restarting" selects them.
	StatusRestarting Status = "restarting"
)

// Sandbox is the record of one sandbox: as stored on disk, returned by
// Create, List and Get, and printed by `sbx inspect`.
type Sandbox struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Status Status `json:"status"`
	// Options are what the sandbox was created with, defaults applied.
	Options Options `json:"spec"`
	// Image is what Options.Image resolved to.
	Image *ImageInfo `json:"image,omitempty"`
	// Pid is the host PID of the sandbox's PID 1 (the executor) while it
	// runs; PidStart its start time (clock ticks after boot), so that a
	// reused PID is not taken for it.
	Pid      int    `json:"pid,omitempty"`
	PidStart uint64 `json:"pid_start,omitempty"`
	// Pids are the host PIDs of every process in the sandbox; only
	// Inspect fills them in.
	Pids []int `json:"pids,omitempty"`
	// Socket is the host path of the executor's unix socket.
	Socket string `json:"socket,omitempty"`
	// Network is the sandbox's network: mode, and in bridge mode its
	// address, gateway and published ports.
	Network *NetworkInfo `json:"network,omitempty"`
	// RootPath is the host path of the mounted root file system.
	RootPath string `json:"root_path,omitempty"`
	// ExitCode of PID 1 once stopped, if known.
	ExitCode *int `json:"exit_code,omitempty"`
	// CmdExit is how the main command (Options.Cmd) ended for good, once
	// the host has seen it end (List, Inspect, Wait, Logs, Stop and the
	// event watcher look); nil while it runs. The sandbox itself keeps
	// running after its main command ends, until stopped or removed; Start
	// clears CmdExit as it runs the command again.
	CmdExit *Exit `json:"cmd_exit,omitempty"`
	// RestartCount is how many times the main command's restart policy
	// (Options.Restart) restarted it since the sandbox last started, as
	// its executor says (List and Inspect ask it; the record keeps the
	// count once the command ended for good).
	RestartCount int `json:"restart_count,omitempty"`
	// CmdRestarting is how the main command's latest run ended while it
	// waits to be restarted (state restarting), as List and Inspect saw
	// it; nil otherwise.
	CmdRestarting *Exit `json:"cmd_restarting,omitempty"`
	// Problem says what is wrong with a sandbox whose status is
	// unreadable, and what to do.
	Problem string `json:"problem,omitempty"`
	// Pool is the warm pool whose idle member this is (status pooled or
	// being created for it); empty once claimed.
	Pool string `json:"pool,omitempty"`
	// FromPool is the pool a create claimed this sandbox from.
	FromPool string `json:"from_pool,omitempty"`
	// Checkpoint is the snapshot a stopped sandbox was checkpointed to:
	// Start resumes it from there.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Idle says the sandbox was checkpointed to Checkpoint by its
	// IdleTimeout: the next exec, attach, session, file or port call
	// restores it (Start does too).
	Idle bool `json:"idle,omitempty"`

	Created   time.Time  `json:"created"`
	Started   *time.Time `json:"started,omitempty"`
	Stopped   *time.Time `json:"stopped,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`

	// CreateTimings break down where the create's time went.
	CreateTimings *CreateTimings `json:"create_timings,omitempty"`
	// Cmd says how Options.Cmd started; only Create's reply has it.
	Cmd *CmdStart `json:"cmd_start,omitempty"`

	// Resources are everything created on the host for the sandbox, in
	// creation order. Each is recorded before it is created, so removal
	// (and GC after a crash) can release exactly these.
	Resources []Resource `json:"resources,omitempty"`
}

// State is the sandbox's state as docker users know it: exited for a
// stopped sandbox and for a running one whose main command ended for good,
// restarting while its main command waits to be restarted, otherwise its
// Status. JSON carries it as "state".
func (s Sandbox) State() Status {
	switch {
	case s.Status == StatusStopped:
		return StatusExited
	case s.Status != StatusRunning || len(s.Options.Cmd) == 0:
		return s.Status
	case s.CmdExit != nil:
		return StatusExited
	case s.CmdRestarting != nil:
		return StatusRestarting
	}
	return s.Status
}

// LastExit is how the sandbox's main command last ended (CmdExit, or the
// run before a restart), or for a stopped sandbox without one its PID 1;
// nil when nothing ended.
func (s Sandbox) LastExit() *Exit {
	switch {
	case s.CmdExit != nil:
		return s.CmdExit
	case s.CmdRestarting != nil:
		return s.CmdRestarting
	case s.Status == StatusStopped && s.ExitCode != nil:
		e := &Exit{ExitCode: *s.ExitCode}
		if s.Stopped != nil {
			e.FinishedAt = *s.Stopped
		}
		return e
	}
	return nil
}

// sandboxJSON is Sandbox without its methods, for the JSON codec.
type sandboxJSON Sandbox

// MarshalJSON adds the sandbox's State as "state".
func (s Sandbox) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		sandboxJSON
		State Status `json:"state"`
	}{sandboxJSON(s), s.State()})
}

// ShortID is the first 12 digits of the id, as listings show it.
func (s *Sandbox) ShortID() string {
	if len(s.ID) > 12 {
		return s.ID[:12]
	}
	return s.ID
}

// ImageInfo is the resolved image of a sandbox.
type ImageInfo struct {
	Ref    string   `json:"ref"`
	Digest string   `json:"digest,omitempty"`
	Layers []string `json:"layers"` // unpacked layer directories, lowest first
	// Env, Workdir and User are the image's defaults for commands;
	// Entrypoint and Cmd its command (a remote Run starts them).
	Env        []string `json:"env,omitempty"`
	Workdir    string   `json:"workdir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// String is the image's reference, what a template's {{.Image}} prints.
func (i *ImageInfo) String() string { return i.Ref }

// NetworkInfo is a sandbox's network as attached.
type NetworkInfo struct {
	SandboxID string `json:"sandbox_id"`
	// Mode is none, host or bridge.
	Mode string `json:"mode"`
	// NetNSPath is the host path of the sandbox's network namespace
	// (bridge mode).
	NetNSPath string       `json:"netns_path,omitempty"`
	IP        netip.Addr   `json:"ip,omitzero"`
	Gateway   netip.Addr   `json:"gateway,omitzero"`
	Subnet    netip.Prefix `json:"subnet,omitzero"`
	HostVeth  string       `json:"host_veth,omitempty"`
	// Ports are the published ports, with the host ports picked for 0.
	Ports          []PortMapping `json:"ports,omitempty"`
	Egress         Egress        `json:"egress,omitzero"`
	AllowHostPorts []HostPort    `json:"allow_host_ports,omitempty"`
	DNS            []netip.Addr  `json:"dns,omitempty"`
	// FromPool says whether the namespace came ready from the pool.
	FromPool bool `json:"from_pool,omitempty"`
}

// PortMapping is one published port.
type PortMapping struct {
	// HostIP limits the mapping to one host address; the zero value means
	// every address of the host.
	HostIP        netip.Addr `json:"host_ip,omitzero"`
	HostPort      uint16     `json:"host_port"`
	ContainerPort uint16     `json:"container_port"`
	Proto         string     `json:"proto"` // tcp or udp
}

// Egress is a bridged sandbox's egress policy: Kind "default" (the
// internet, no private ranges), "none", or "allow" with the Allow list.
type Egress struct {
	Kind  string         `json:"kind,omitempty"`
	Allow []netip.Prefix `json:"allow,omitempty"`
}

// HostPort is a host port a bridged sandbox may reach.
type HostPort struct {
	Port  uint16 `json:"port"`
	Proto string `json:"proto"`
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
	// ClaimS is the time taken to claim and set up a warm pool's member,
	// when the create took one (then the other steps ran ahead).
	ClaimS float64 `json:"claim_s,omitempty"`
	TotalS float64 `json:"total_s"`
	// Pool says whether a warm pool served the create: "hit, NAME", or
	// "miss, REASON" (no pool for the image, a key field that differs, no
	// ready member). Empty for a pool's own members.
	Pool string `json:"pool,omitempty"`
}

// CmdStart says how a create's Options.Cmd (the sandbox's main command)
// started: Status "running", or "exited" with ExitCode when it ended at
// once. Read its output with Logs, wait for it with Wait, signal it with
// Signal; Stop ends it before the sandbox.
type CmdStart struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// ResourceKind says how a Resource is released.
type ResourceKind string

// The kinds of host resources a sandbox owns.
const (
	// ResourceRunDir is the sandbox's runtime directory (sockets, mount
	// points, container state); released by removing it.
	ResourceRunDir ResourceKind = "rundir"
	// ResourceRootfs is the mounted root (overlay over the image on a
	// size-capped tmpfs, plus volumes); released by unmounting it.
	ResourceRootfs ResourceKind = "rootfs"
	// ResourceNetwork is the sandbox's network in bridge mode (lease,
	// namespace, veth, rules); released by detaching it.
	ResourceNetwork ResourceKind = "network"
	// ResourceContainer is the container with its cgroups; released by
	// killing it and destroying its state and cgroups.
	ResourceContainer ResourceKind = "container"
	// ResourceUserNS is the user namespace id range leased to the sandbox
	// (Path names the lease's owner); released by giving it back.
	ResourceUserNS ResourceKind = "userns"
	// ResourceEgressState is the host-side egress state of a sandbox
	// whose traffic is inspected (its CA and its secrets' values, never
	// seen by the sandbox); released by removing the directory Path.
	ResourceEgressState ResourceKind = "egress-state"
)

// Resource is one thing created on the host for a sandbox.
type Resource struct {
	Kind ResourceKind `json:"kind"`
	// Path locates it: a directory, a mount point, a state directory.
	Path string `json:"path,omitempty"`
	// ID names it where a path is not enough (the container id).
	ID string `json:"id,omitempty"`
}

// Filter selects sandboxes in List. The zero Filter selects all.
type Filter struct {
	// Labels must all be present; an empty value matches any value.
	Labels map[string]string
	// Status, if set, must match: a record's status, or the state exited
	// or restarting (Sandbox.State); running then leaves out the sandboxes
	// whose main command ended.
	Status Status
	// Name, if set, must match exactly.
	Name string
	// Running selects only running and paused sandboxes (and those being
	// created, and idle pool members when Pooled), as docker ps without
	// -a: not a running sandbox whose main command ended for good.
	Running bool
	// Pooled also selects the idle members of warm pools (and those being
	// created for them), which are hidden otherwise; a Status of
	// StatusPooled selects them too.
	Pooled bool
}

// ParseLabel adds "k=v" (or "k", any value) to f.Labels; it is the form of
// the CLI's --filter label=k=v and of the REST ?label=k=v.
func (f *Filter) ParseLabel(s string) error {
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

// Match reports whether f selects sb.
func (f Filter) Match(sb *Sandbox) bool {
	if sb.Pool != "" && !f.Pooled && f.Status != StatusPooled {
		return false
	}
	if f.Status != "" && !f.matchStatus(sb) {
		return false
	}
	if f.Name != "" && sb.Name != f.Name {
		return false
	}
	if f.Running && (sb.State() == StatusExited || sb.Status == StatusRemoving || sb.Status == StatusUnreadable) {
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

// matchStatus reports whether sb is in f.Status: a record's status, or
// one of the states exited and restarting (Sandbox.State). A running
// sandbox whose main command ended is exited, not running.
func (f Filter) matchStatus(sb *Sandbox) bool {
	switch st := sb.State(); f.Status {
	case StatusExited, StatusRestarting, StatusRunning:
		return st == f.Status
	}
	return sb.Status == f.Status
}

// StopOptions say how Stop ends a sandbox's PID 1.
type StopOptions struct {
	// Timeout is how long to wait after Signal before SIGKILL; zero means
	// DefaultStopTimeout.
	Timeout time.Duration
	// Signal is the first signal's name; empty means SIGTERM.
	Signal string
	// Checkpoint stops the sandbox by checkpointing it (no signal):
	// Start resumes its processes where they were.
	Checkpoint bool
}

// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// RemoveOptions say how Remove treats a running sandbox.
type RemoveOptions struct {
	// Force kills a running or paused sandbox; without it Remove fails
	// with ErrState.
	Force bool
}

// Usage is what a sandbox uses now, as its cgroups report it.
type Usage struct {
	CPUTimeS           float64 `json:"cpu_time_s"`
	UserTimeS          float64 `json:"user_time_s"`
	SysTimeS           float64 `json:"sys_time_s"`
	CPUThrottledS      float64 `json:"cpu_throttled_s"`
	MemoryCurrentBytes uint64  `json:"memory_current_bytes"`
	MemoryPeakBytes    uint64  `json:"memory_peak_bytes"`
	MemoryLimitBytes   uint64  `json:"memory_limit_bytes,omitempty"`
	OOMKills           uint64  `json:"oom_kills"`
	Pids               uint64  `json:"pids"`
	// PidsPeak is zero where the host does not track it (before Linux
	// 6.1).
	PidsPeak  uint64 `json:"pids_peak,omitempty"`
	PidsLimit uint64 `json:"pids_limit,omitempty"`
}

// Event types.
const (
	EventCreated      = "sandbox.created" // recorded; its resources are being made
	EventReady        = "sandbox.ready"   // the executor answers
	EventPaused       = "sandbox.paused"
	EventResumed      = "sandbox.resumed"
	EventStarted      = "sandbox.started" // a stopped sandbox runs again
	EventOOM          = "sandbox.oom"     // a process was OOM-killed
	EventExited       = "sandbox.exited"  // PID 1 exited or was stopped
	EventDied         = "sandbox.died"    // the main command ended for good (ExitCode), as docker's die
	EventRemoved      = "sandbox.removed"
	EventRenamed      = "sandbox.renamed" // Name is the new name
	EventEgress       = "sandbox.egress"  // an egress decision by name (Egress)
	EventImagePulled  = "image.pulled"    // pulled, imported or committed
	EventImageTagged  = "image.tagged"    // Image is the new name
	EventImageRemoved = "image.removed"
	// EventReset says events may have been lost (a restarted server, a
	// consumer too far behind): re-read the state with List rather than
	// rely on the stream alone.
	EventReset = "reset"
)

// EventsBuffered, given as the since of Events, replays every event the
// host still buffers (behind an EventReset) and then follows new ones; it
// is since=0 on the REST API, where no since at all means only new ones.
const EventsBuffered = ^uint64(0)

// Event is one change of a sandbox or image. Seq increases by one per
// event, so a gap shows a lost event; resume after the last Seq received.
type Event struct {
	Seq      uint64    `json:"seq"`
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Sandbox  string    `json:"sandbox,omitempty"`
	Name     string    `json:"name,omitempty"`
	Status   Status    `json:"status,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	OOMKills uint64    `json:"oom_kills,omitempty"`
	Image    string    `json:"image,omitempty"`
	// Egress is set for EventEgress.
	Egress *EgressAudit `json:"egress,omitempty"`
}

// EgressUpdate is a new egress policy for a running bridged sandbox
// (Sandboxes.SetEgress).
type EgressUpdate struct {
	// Egress is as Options.Egress: "default", "none", or CIDRs and host
	// names (docs/network.md).
	Egress string `json:"egress"`
}

// EgressCount counts the decisions of one kind and outcome that the
// egress daemon run by a Host made since it started (Host.EgressCounts;
// the server's sbx_egress_decisions_total).
type EgressCount struct {
	// Kind and Decision are as in EgressAudit.
	Kind     string `json:"kind"`
	Decision string `json:"decision"`
	N        uint64 `json:"n"`
}

// EgressAudit is one decision of the egress daemon for a sandbox whose
// policy names hosts: a DNS query refused, a connection, or a request on
// an inspected host. It never holds a secret's value.
type EgressAudit struct {
	// Kind is "dns", "connection" or "request".
	Kind string `json:"kind"`
	// Name is the host name (SNI, Host, query); Addr the address and port
	// the sandbox connected to.
	Name string `json:"name,omitempty"`
	Addr string `json:"addr,omitempty"`
	// Rule is the policy entry that decided, as written.
	Rule string `json:"rule,omitempty"`
	// Decision is "allow", "deny" or "audit"; Reason says why a deny.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Method and Path are set for requests.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// BytesUp and BytesDown count what went each way.
	BytesUp   int64 `json:"bytes_up,omitempty"`
	BytesDown int64 `json:"bytes_down,omitempty"`
}

// GCReport says what a garbage collection removed.
type GCReport struct {
	// Runs are one-shot runs whose sbx process died, cleaned up.
	Runs []string `json:"runs,omitempty"`
	// Expired sandboxes removed because their TTL passed.
	Expired []string `json:"expired,omitempty"`
	// Interrupted sandboxes whose create or remove died midway, undone.
	Interrupted []string `json:"interrupted,omitempty"`
	// Stopped sandboxes found dead and marked stopped.
	Stopped []string `json:"stopped,omitempty"`
	// Orphans are runtime directories and names that belong to no
	// sandbox, and named volumes made on first use by a create that
	// never finished ("volume:NAME").
	Orphans []string `json:"orphans,omitempty"`
	// PartialSnapshots counts snapshots whose checkpoint or import died
	// midway, removed.
	PartialSnapshots int `json:"partial_snapshots,omitempty"`
	// Pooled are idle warm-pool members removed: their PID 1 died, or
	// their pool is gone.
	Pooled []string `json:"pooled,omitempty"`
	// AutoRemoved are sandboxes created with AutoRemove found stopped or
	// with their command ended (their remover died), removed.
	AutoRemoved []string `json:"auto_removed,omitempty"`
}

// HostInfo is what a host offers and what sbx uses there, as `sbx info`
// reports it.
type HostInfo struct {
	Version           string   `json:"version"`
	Kernel            string   `json:"kernel"`
	CgroupMode        string   `json:"cgroup_mode"`
	CgroupControllers []string `json:"cgroup_controllers"`
	CgroupParent      string   `json:"cgroup_parent"`
	SwapLimit         bool     `json:"swap_limit"`
	Seccomp           bool     `json:"seccomp"`
	LibseccompVersion string   `json:"libseccomp_version,omitempty"`
	Overlayfs         bool     `json:"overlayfs"`
	UserNamespaces    bool     `json:"user_namespaces"`
	Root              string   `json:"root"`
	RunRoot           string   `json:"run_root"`
	Uses              []string `json:"uses"`
	Warnings          []string `json:"warnings,omitempty"`
	// Checkpoints says whether checkpoint, restore and fork work here: the
	// CRIU found and its version, or why they do not.
	Checkpoints string `json:"checkpoints,omitempty"`
}

// Policy is what a host lets its callers ask for. The CLI acting on its
// own host allows everything; `sbx serve` allows what its flags say.
type Policy struct {
	// AllowedHostDirs are the host directories under which Options may
	// name a rootfs or volume host paths (symlinks resolved); none when
	// empty.
	AllowedHostDirs []string
	// AllowHostNetwork allows network "host", allow_host_ports, and DNS
	// servers at private or host addresses.
	AllowHostNetwork bool
	// AllowPrivileged allows cap_add and seccomp profiles other than the
	// default.
	AllowPrivileged bool
}

// LogOptions say which output of a sandbox's main command (Options.Cmd)
// Logs returns. Offsets are absolute byte offsets in the command's
// output, so a consumer resumes exactly where it stopped.
type LogOptions struct {
	// Since is the offset to start at (0: the oldest output still held).
	Since int64
	// Tail, when positive, starts this many bytes before the end instead.
	Tail int64
	// Follow keeps streaming until the main command has ended for good.
	Follow bool
}

// Log frame types.
const (
	LogStdout = "stdout" // output of the main command on its stdout
	LogStderr = "stderr" // output on its stderr
	LogGap    = "gap"    // Lost bytes from Offset on are no longer held
	LogEnd    = "end"    // the last frame: Offset is where to resume
)

// LogFrame is one piece of a main command's output. Offset is the absolute
// offset of Data's first byte (for "gap" of the first lost byte, for "end"
// the offset to resume from).
type LogFrame struct {
	Type   string    `json:"type"`
	Offset int64     `json:"offset"`
	Data   string    `json:"data,omitempty"`
	Time   time.Time `json:"time,omitzero"`
	Lost   int64     `json:"lost,omitempty"`
}

// Exit is how a sandbox's main command ended. ExitCode is 128+n for
// signal n, as a shell reports it; Signal names it ("SIGKILL") or is "".
// OOMKilled comes from the sandbox's cgroup, not from inside it. Error
// says why the command could not start at all.
type Exit struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal"`
	OOMKilled  bool      `json:"oom_killed"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Kinds of a Change, as docker diff prints them.
const (
	ChangeAdded   = "A"
	ChangeChanged = "C"
	ChangeDeleted = "D"
)

// Change is one path of a sandbox's root file system that differs from
// its image (docker diff): Kind is ChangeAdded, ChangeChanged or
// ChangeDeleted; Path is absolute inside the sandbox.
type Change struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// DiskUsage is what sbx holds on a host, as docker system df shows it:
// images and their unpacked layers (each layer counted once), and the
// sandboxes' writable layers (tmpfs: memory, not disk).
type DiskUsage struct {
	Images      int `json:"images"`
	ImagesInUse int `json:"images_in_use"` // images a sandbox on record was made from
	// LayersBytes is the size of the cached images' layers;
	// ReclaimableBytes the part no sandbox on record uses, which Prune
	// with All frees.
	LayersBytes      int64 `json:"layers_bytes"`
	ReclaimableBytes int64 `json:"reclaimable_bytes"`
	Sandboxes        int   `json:"sandboxes"`
	SandboxesRunning int   `json:"sandboxes_running"`
	// WritableBytes is what the sandboxes' writable layers hold;
	// StoppedWritableBytes the part of exited sandboxes (stopped, or
	// whose main command ended; not counted as running), which Prune
	// frees.
	WritableBytes        int64 `json:"writable_bytes"`
	StoppedWritableBytes int64 `json:"stopped_writable_bytes"`
	// BuildCacheImages are the step images builds keep (sbx-build:*);
	// BuildCacheBytes the layers only they use, and BuildCacheMountBytes
	// what the RUN --mount=type=cache directories hold: sbx build prune
	// frees both.
	BuildCacheImages     int   `json:"build_cache_images"`
	BuildCacheBytes      int64 `json:"build_cache_bytes"`
	BuildCacheMountBytes int64 `json:"build_cache_mount_bytes"`
}

// PruneOptions say what Prune removes besides exited sandboxes and
// unused layers: with All, also every image no sandbox on record uses.
type PruneOptions struct {
	All bool `json:"all"`
}

// PruneReport says what Prune removed.
type PruneReport struct {
	Sandboxes []string      `json:"sandboxes"` // ids of the removed exited sandboxes
	Images    []string      `json:"images"`    // names of the removed images
	Layers    ImageGCReport `json:"layers"`    // the image GC that followed
}

// ProcessInfo is one process of a running sandbox, as docker top lists
// it: its PID inside the sandbox and on the host, its parent (inside),
// real UID, state (R, S, D, Z, T...), CPU time, resident memory, and
// command line (made safe to print: the sandbox wrote it).
type ProcessInfo struct {
	PID      int     `json:"pid"`
	HostPID  int     `json:"host_pid"`
	PPID     int     `json:"ppid"`
	UID      int     `json:"uid"`
	State    string  `json:"state"`
	CPUTimeS float64 `json:"cpu_time_s"`
	RSSBytes int64   `json:"rss_bytes"`
	Command  string  `json:"command"`
}
