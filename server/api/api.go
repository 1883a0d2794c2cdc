// Package api holds the wire types of sbx's REST server (sbx serve): the
// JSON bodies of its /v1 routes. It depends on nothing but the standard
// library, so remote controllers can use it (and server/client) without
// cgo. The executor's own types, which the server proxies unchanged under
// /v1/sandboxes/{id}/, live in executor/api.
package api

import (
	"encoding/json"
	"time"

	"github.com/sbxrun/sbx"
)

// Content types of the server's replies.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeNDJSON = "application/x-ndjson"
	ContentTypeSSE    = "text/event-stream"
)

// Error codes of the server's own errors (the executor's pass through
// unchanged).
const (
	CodeBadRequest   = "bad_request"        // 400: malformed JSON, query or id
	CodeUnauthorized = "unauthorized"       // 401: no or wrong bearer token
	CodeForbidden    = "forbidden"          // 422: the server's policy refuses the option
	CodeNotFound     = "not_found"          // 404: no such sandbox, image or route
	CodeMethod       = "method_not_allowed" // 405
	CodeConflict     = "conflict"           // 409: name in use, sandbox busy or in the wrong state
	CodeTooLarge     = "too_large"          // 413: request body over the cap
	CodeInvalid      = "invalid"            // 422: well-formed but unacceptable options
	CodeLimit        = "limit"              // 429: a sandbox or concurrency limit
	CodeInternal     = "internal"           // 500
	CodeBadGateway   = "bad_gateway"        // 502: the sandbox's executor failed
	CodeUnavailable  = "unavailable"        // 503: shutting down, or a feature not configured
)

// Error is the body of every error reply: {"error":{"code","message"}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what failed and, in Message, what to do about it.
type ErrorBody = sbx.ErrorBody

// CreateRequest is the body of POST /v1/sandboxes. Exactly one of Image and
// Rootfs is set; Rootfs and volume host paths must lie under directories
// the server allows.
type CreateRequest struct {
	Name   string `json:"name,omitempty"`
	Image  string `json:"image,omitempty"`
	Rootfs string `json:"rootfs,omitempty"`
	// Cmd, if set, is started once the sandbox is ready, in a new shell
	// session of its executor (see CmdStart); it runs detached from the
	// request.
	Cmd      []string `json:"cmd,omitempty"`
	Env      []string `json:"env,omitempty"` // KEY=VALUE
	Workdir  string   `json:"workdir,omitempty"`
	User     string   `json:"user,omitempty"`
	Hostname string   `json:"hostname,omitempty"`
	Limits   Limits   `json:"limits,omitzero"`
	// Network is none (default), bridge or host. Publish, Egress,
	// AllowHostPorts and DNS apply to bridge mode, in the syntax of the
	// CLI flags (docs/network.md): "8080:80", "127.0.0.1:8080:80/udp".
	Network        string            `json:"network,omitempty"`
	Publish        []string          `json:"publish,omitempty"`
	Egress         string            `json:"egress,omitempty"`
	AllowHostPorts []string          `json:"allow_host_ports,omitempty"`
	DNS            []string          `json:"dns,omitempty"`
	Volumes        []Volume          `json:"volumes,omitempty"`
	Tmpfs          []Tmpfs           `json:"tmpfs,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	// TTL removes the sandbox this long after its creation.
	TTL            Duration `json:"ttl,omitempty"`
	ReadonlyRootfs bool     `json:"readonly_rootfs,omitempty"`
	CapAdd         []string `json:"cap_add,omitempty"`
	CapDrop        []string `json:"cap_drop,omitempty"`
	Seccomp        string   `json:"seccomp,omitempty"`
}

// Limits are a sandbox's resource limits; zero means the server's default.
type Limits struct {
	Memory Size    `json:"memory,omitempty"`
	CPUs   float64 `json:"cpus,omitempty"`
	Pids   int64   `json:"pids,omitempty"`
	Disk   Size    `json:"disk,omitempty"`
}

// Volume mounts HostPath (on the server) at Path inside the sandbox.
type Volume struct {
	HostPath string `json:"host_path"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Tmpfs mounts an empty in-memory file system at Path.
type Tmpfs struct {
	Path string `json:"path"`
	Size Size   `json:"size,omitempty"`
}

// Size is a byte count: a number of bytes or a string with a binary unit
// ("512m", "1GiB", "64k").
type Size = sbx.Size

// ParseSize parses a byte count with an optional binary unit.
func ParseSize(s string) (int64, error) { return sbx.ParseSize(s) }

// Duration is a time span: a Go duration string ("30m"); requests may also
// give a number of seconds.
type Duration = sbx.Duration

// Sandbox is a sandbox's record, as `sbx inspect` prints it. Spec holds
// the options it was created with, in the Manager's form (limits in bytes,
// ttl in nanoseconds).
type Sandbox struct {
	ID        string          `json:"id"`
	Name      string          `json:"name,omitempty"`
	Status    string          `json:"status"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	Image     json.RawMessage `json:"image,omitempty"`
	Pid       int             `json:"pid,omitempty"`
	Pids      []int           `json:"pids,omitempty"` // every process, in GET /v1/sandboxes/{id}
	Socket    string          `json:"socket,omitempty"`
	Network   json.RawMessage `json:"network,omitempty"`
	RootPath  string          `json:"root_path,omitempty"`
	ExitCode  *int            `json:"exit_code,omitempty"`
	Created   time.Time       `json:"created"`
	Started   *time.Time      `json:"started,omitempty"`
	Stopped   *time.Time      `json:"stopped,omitempty"`
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	// CreateTimings break a create down into admit, rootfs, start and
	// ready seconds.
	CreateTimings json.RawMessage `json:"create_timings,omitempty"`
	Resources     json.RawMessage `json:"resources,omitempty"`
}

// SandboxList is the reply of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// StopRequest is the optional body of POST /v1/sandboxes/{id}/stop:
// seconds (or a duration string) between SIGTERM and SIGKILL.
type StopRequest struct {
	Timeout Duration `json:"timeout,omitempty"`
}

// CommitRequest is the body of POST /v1/sandboxes/{id}/commit: the name
// of the new image made of the sandbox's image plus its writable layer.
type CommitRequest struct {
	Name string `json:"name"`
}

// Stats is the reply of GET /v1/sandboxes/{id}/stats: what the sandbox's
// cgroups say it uses now. Times are in nanoseconds.
type Stats struct {
	CPUTime       time.Duration `json:"cpu_time"`
	UserTime      time.Duration `json:"user_time"`
	SysTime       time.Duration `json:"sys_time"`
	MemoryCurrent uint64        `json:"memory_current_bytes"`
	MemoryPeak    uint64        `json:"memory_peak_bytes"`
	MemoryLimit   uint64        `json:"memory_limit_bytes,omitempty"`
	OOMKills      uint64        `json:"oom_kills"`
	Pids          uint64        `json:"pids"`
	PidsPeak      uint64        `json:"pids_peak,omitempty"`
	PidsLimit     uint64        `json:"pids_limit,omitempty"`
	CPUThrottled  time.Duration `json:"cpu_throttled"`
}

// PullRequest is the body of POST /v1/images/pull.
type PullRequest struct {
	Ref string `json:"ref"`
}

// Image is a cached image.
type Image struct {
	Name     string    `json:"name"`
	Digest   string    `json:"digest"`
	Created  time.Time `json:"created,omitzero"`
	Platform string    `json:"platform,omitempty"`
	Size     int64     `json:"size"`
}

// ImageDetail is the reply of GET /v1/images/{ref}: the image as the
// server's cache holds it, the same JSON sbx image inspect prints.
type ImageDetail struct {
	Name      string      `json:"name"`
	Digest    string      `json:"digest"`
	Created   time.Time   `json:"created"`
	Platform  string      `json:"platform"`
	Size      int64       `json:"size"`
	Config    ImageConfig `json:"config"`
	LayerDirs []string    `json:"layerDirs"` // on the server, lowest first
	DiffIDs   []string    `json:"diffIDs"`
}

// ImageConfig is the part of an image config that decides how a process
// starts in the image.
type ImageConfig struct {
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	StopSignal string            `json:"stopSignal,omitempty"`
}

// ImageGCReport is the reply of POST /v1/images/gc: the layers removed
// from the server's cache.
type ImageGCReport struct {
	RemovedLayers []string `json:"removedLayers"` // keys of the removed layers
	FreedBytes    int64    `json:"freedBytes"`    // their apparent size
	KeptInUse     []string `json:"keptInUse"`     // unreferenced layers kept because a mount uses them
}

// PrepareRequest is the body of POST /v1/images/prepare: build (once) an
// image from Base plus Script, as sbx prepare does.
type PrepareRequest struct {
	Base    string   `json:"base"`
	Script  string   `json:"script"`        // run with /bin/sh -c
	Env     []string `json:"env,omitempty"` // KEY=VALUE
	User    string   `json:"user,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	Network string   `json:"network,omitempty"` // none (default), bridge or host
}

// PrepareReply is the reply of POST /v1/images/prepare.
type PrepareReply struct {
	// Image is the prepared image, named sbx-prepared:<hash>.
	Image Image `json:"image"`
	// Cached is true when the image was already in the cache.
	Cached bool `json:"cached"`
	// Output is the script's output (stdout and stderr), its last 64 KiB.
	Output string `json:"output,omitempty"`
}

// ImageList is the reply of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// PullProgress reports one layer's state during a pull.
type PullProgress struct {
	Layer   string `json:"layer"`
	Index   int    `json:"index"`
	Phase   string `json:"phase"`
	Current int64  `json:"current"`
	Total   int64  `json:"total"`
}

// Frame types of a pull with NDJSON progress (Accept: application/x-ndjson
// or ?progress=1).
const (
	FrameProgress = "progress"
	FrameResult   = "result"
	FrameError    = "error"
)

// PullFrame is one line of a pull with progress: progress frames, then
// exactly one result or error frame.
type PullFrame struct {
	Type     string        `json:"type"`
	Progress *PullProgress `json:"progress,omitempty"`
	Image    *Image        `json:"image,omitempty"`
	Error    *ErrorBody    `json:"error,omitempty"`
}

// Event types of GET /v1/events.
const (
	EventCreated     = sbx.EventCreated
	EventReady       = sbx.EventReady
	EventPaused      = sbx.EventPaused
	EventResumed     = sbx.EventResumed
	EventStarted     = sbx.EventStarted
	EventOOM         = sbx.EventOOM
	EventExited      = sbx.EventExited
	EventRemoved     = sbx.EventRemoved
	EventImagePulled = sbx.EventImagePulled
	EventImageRemove = sbx.EventImageRemoved
	EventReset       = sbx.EventReset
)

// Event is one server-sent event (the contract's). A server numbers its
// events from a boot epoch (unix microseconds at its start), so the ids of
// a restarted server are larger than those of the one before it.
type Event = sbx.Event

// CmdStart says how a create request's cmd started (the contract's).
type CmdStart = sbx.CmdStart

// Health is the reply of GET /healthz.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// HostInfo is GET /v1/info: what the server's host offers and what sbx
// uses there, as `sbx info` reports it.
type HostInfo = sbx.HostInfo

// GCReport is the reply of POST /v1/gc: what the server's garbage
// collection removed.
type GCReport = sbx.GCReport
