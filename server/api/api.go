// Package api holds the wire types of sbx's REST server (sbx serve): the
// JSON bodies of its /v1 routes. It depends on nothing but the standard
// library, so remote controllers can use it (and server/client) without
// cgo. The executor's own types, which the server proxies unchanged under
// /v1/sandboxes/{id}/, live in executor/api.
package api

import "github.com/sbxrun/sbx"

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
	CodePortInUse    = "port_in_use"        // 409: a host port to publish is taken
	CodeTooLarge     = "too_large"          // 413: request body over the cap
	CodeInvalid      = "invalid"            // 422: well-formed but unacceptable options
	CodeLimit        = "limit"              // 429: a sandbox or concurrency limit
	CodeInternal     = "internal"           // 500
	CodeBadGateway   = "bad_gateway"        // 502: the sandbox's executor failed
	CodeUnavailable  = "unavailable"        // 503: shutting down, or a feature not configured
	CodeUnsupported  = "unsupported"        // 501: the server's backend cannot do this
	// CodeRegistryAuth and CodeRegistryUnreachable (502): an image
	// registry refused the server's credentials, or could not be reached.
	CodeRegistryAuth        = "registry_auth"
	CodeRegistryUnreachable = "registry_unreachable"
)

// Error is the body of every error reply: {"error":{"code","message"}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what failed and, in Message, what to do about it.
type ErrorBody = sbx.ErrorBody

// Size is a byte count: a number of bytes or a string with a binary unit
// ("512m", "1GiB", "64k").
type Size = sbx.Size

// ParseSize parses a byte count with an optional binary unit.
func ParseSize(s string) (int64, error) { return sbx.ParseSize(s) }

// Duration is a time span: a Go duration string ("30m"); requests may also
// give a number of seconds.
type Duration = sbx.Duration

// Sandbox is a sandbox's record (the contract's), the reply of the
// sandbox routes; "spec" holds the options it was created with.
type Sandbox = sbx.Sandbox

// SandboxList is the reply of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []*Sandbox `json:"sandboxes"`
}

// SnapshotList is the reply of GET /v1/snapshots.
type SnapshotList struct {
	Snapshots []*sbx.Snapshot `json:"snapshots"`
}

// ForkReply is the reply of POST /v1/sandboxes/{id}/fork: the copies.
type ForkReply struct {
	Sandboxes []*sbx.Sandbox `json:"sandboxes"`
}

// PoolList is the reply of GET /v1/pools.
type PoolList struct {
	Pools []*sbx.Pool `json:"pools"`
}

// StopRequest is the optional body of POST /v1/sandboxes/{id}/stop: the
// first signal's name (default SIGTERM) and how long to wait for PID 1 to
// exit before SIGKILL (a duration string or seconds; default 10s).
type StopRequest struct {
	Timeout    Duration `json:"timeout,omitempty"`
	Signal     string   `json:"signal,omitempty"`
	Checkpoint bool     `json:"checkpoint,omitempty"`
}

// SignalRequest is the body of POST /v1/sandboxes/{id}/signal: the
// signal's name ("SIGTERM") for the sandbox's main command.
type SignalRequest struct {
	Signal string `json:"signal"`
}

// CommitRequest is the body of POST /v1/sandboxes/{id}/commit: the name
// of the new image made of the sandbox's image plus its writable layer.
type CommitRequest struct {
	Name string `json:"name"`
}

// PullRequest is the body of POST /v1/images/pull.
type PullRequest struct {
	Ref string `json:"ref"`
}

// Image is a cached image (the contract's); GET /v1/images/{ref} gives
// it in full, with its config and layers.
type Image = sbx.Image

// ImageGCReport is the reply of POST /v1/images/gc: the layers removed
// from the server's cache.
type ImageGCReport = sbx.ImageGCReport

// PrepareRequest is the body of POST /v1/images/prepare: build (once) an
// image from Base plus Script, as sbx prepare does.
//
// Sandbox sets how the build sandbox is created (limits, network, env,
// user, working directory...; no volumes), under the server's policy. Env,
// User, Workdir and Network are the short form of the same; give one form.
type PrepareRequest struct {
	Base    string       `json:"base"`
	Script  string       `json:"script"` // run with /bin/sh -c
	Sandbox *sbx.Options `json:"sandbox,omitempty"`
	Env     []string     `json:"env,omitempty"` // KEY=VALUE
	User    string       `json:"user,omitempty"`
	Workdir string       `json:"workdir,omitempty"`
	Network string       `json:"network,omitempty"` // none (default), bridge or host
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
type PullProgress = sbx.PullProgress

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

// BuildFrame is one line of POST /v1/images/build (NDJSON): output frames
// (the build's progress text, as sbx build prints it), then exactly one
// result or error frame.
type BuildFrame struct {
	Type   string           `json:"type"`
	Output string           `json:"output,omitempty"`
	Build  *sbx.BuildResult `json:"build,omitempty"`
	Error  *ErrorBody       `json:"error,omitempty"`
}

// FrameOutput is the type of a build's output frames.
const FrameOutput = "output"

// A POST /v1/images/build that sends secrets (RUN --mount=type=secret) is
// multipart/form-data: a part named BuildSecretsPart, a JSON object of
// each secret's value in base64 by its id, then a part named
// BuildContextPart, the context's tar stream. Without secrets the body is
// the tar stream alone (application/x-tar).
const (
	BuildSecretsPart = "secrets"
	BuildContextPart = "context"
)

// MaxBuildSecretsPartBytes caps the secrets part of a build request (its
// JSON, base64 included); each secret is capped by sbx.MaxBuildSecretBytes.
const MaxBuildSecretsPartBytes = 8 << 20

// Event is one server-sent event (the contract's; its types are the
// sbx.Event* constants). A server numbers its events from a boot epoch
// (unix microseconds at its start), so the ids of a restarted server are
// larger than those of the one before it.
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

// RenameRequest is the body of POST /v1/sandboxes/{id}/rename: the
// sandbox's new unique name ("" drops its name).
type RenameRequest struct {
	Name string `json:"name"`
}

// ChangeList is the reply of GET /v1/sandboxes/{id}/diff: what the
// sandbox changed in its root over its image, sorted by path.
type ChangeList struct {
	Changes []sbx.Change `json:"changes"`
}

// TagRequest is the body of POST /v1/images/tag: give the cached image
// source the further name target (NAME[:TAG]).
type TagRequest struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// ImageHistory is the reply of GET /v1/images/history?ref=REF: how the
// image was built, newest step first.
type ImageHistory struct {
	History []sbx.ImageHistoryEntry `json:"history"`
}

// SaveRequest is the body of POST /v1/images/save: the images to write,
// as one OCI archive (the reply, application/x-tar).
type SaveRequest struct {
	Refs []string `json:"refs"`
}

// ContentTypeTar is the content type of an image archive (POST
// /v1/images/save's reply).
const ContentTypeTar = "application/x-tar"

// ProcessList is the reply of GET /v1/sandboxes/{id}/top.
type ProcessList struct {
	Processes []sbx.ProcessInfo `json:"processes"`
}

// VolumeList is the reply of GET /v1/volumes.
type VolumeList struct {
	Volumes []*sbx.VolumeInfo `json:"volumes"`
}
