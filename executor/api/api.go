// Package api holds the wire types of the sbx executor: the JSON bodies of
// its HTTP endpoints on the sandbox's unix socket. The REST server exposes
// the same paths under /v1/sandboxes/{id}/.
package api

import "github.com/sbxrun/sbx"

// Endpoint paths of the executor. Paths with {id} take a session id.
const (
	PathHealth        = "/v1/health"
	PathInfo          = "/v1/info"
	PathExec          = "/v1/exec"
	PathSessions      = "/v1/sessions"
	PathFiles         = "/v1/files"
	PathFilesEdit     = "/v1/files/edit"
	PathFsList        = "/v1/fs/list"
	PathFsArchive     = "/v1/fs/archive"
	ContentTypeNDJSON = "application/x-ndjson"
)

// Error codes carried in ErrorBody.Code.
const (
	CodeBadRequest       = "bad_request"        // malformed body or parameters
	CodeNotFound         = "not_found"          // path, session or route does not exist
	CodeMethodNotAllowed = "method_not_allowed" // the route exists, not with this method
	CodeNotRegular       = "not_regular_file"   // a read of a FIFO, device or socket
	CodeExists           = "exists"             // create on an existing path
	CodeIsDirectory      = "is_directory"       // a file operation on a directory
	CodeBinary           = "binary_file"        // edit or line read of a binary file
	CodeTooLarge         = "too_large"          // file or body over a limit
	CodeNoMatch          = "no_match"           // str_replace found old_str nowhere
	CodeMultiMatch       = "multiple_matches"   // str_replace found old_str more than once
	CodeBadRange         = "invalid_range"      // view_range, insert_line or line range out of bounds
	CodeNoHistory        = "no_history"         // undo_edit without a previous version
	CodeNotRunning       = "not_running"        // "" or input to a session with no running command
	CodeBusy             = "busy"               // another call is already waiting on the session
	CodeUnsafePath       = "unsafe_path"        // an archive entry that would land outside its directory
	CodeLimit            = "limit"              // too many sessions or concurrent commands
	CodeShuttingDown     = "shutting_down"      // the executor is stopping
	CodeInternal         = "internal"           // anything else
)

// Error is the body of every non-2xx reply: {"error":{"code","message"}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what failed; it is the contract's (package sbx).
type ErrorBody = sbx.ErrorBody

// Health is the reply of GET /v1/health.
type Health struct {
	Status  string  `json:"status"`
	Version string  `json:"version"`
	UptimeS float64 `json:"uptime_s"`
}

// Defaults are the default environment ("K=V"), working directory and
// user of later commands that the host writes, as JSON, into the
// descriptor a warm pool's member was started with (--claim-defaults-fd)
// when it hands the member to a create.
type Defaults struct {
	Env     []string `json:"env"`
	Workdir string   `json:"workdir"`
	// User is "USER[:GROUP]" by name or number, looked up in the
	// sandbox's /etc/passwd and /etc/group; empty is the executor's own
	// user.
	User string `json:"user,omitempty"`
}

// ExecRequest is the body of POST /v1/exec, ExecResult its reply and
// ExecFrame one line of a streamed exec (POST /v1/exec?stream=1): the
// contract's types (package sbx), so that the executor, the REST server,
// the CLI and embedders share one form.
type (
	ExecRequest = sbx.ExecRequest
	ExecResult  = sbx.ExecResult
	ExecFrame   = sbx.ExecFrame
)

// Frame types of a streamed exec, one JSON object per line.
const (
	FrameStdout = sbx.FrameStdout
	FrameStderr = sbx.FrameStderr
	FrameResult = sbx.FrameResult
	FrameError  = sbx.FrameError
)

// SessionRequest is the body of POST /v1/sessions. Shell is "bash", "sh",
// a path, or a command line such as "/bin/busybox sh"; empty picks bash
// when it exists and sh otherwise.
type SessionRequest struct {
	Cwd   string            `json:"cwd,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Shell string            `json:"shell,omitempty"`
	User  string            `json:"user,omitempty"`
}

// Session describes one shell session.
type Session struct {
	ID      string `json:"id"`
	Shell   string `json:"shell,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
}

// SessionList is the reply of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// RunRequest is the body of POST /v1/sessions/{id}/run.
//
// TimeoutS is the hard limit of this call (default 120 s);
// NoOutputTimeoutS ends the call after that long without new output
// (default 30 s; a pointer to 0 turns it off). Without StopSignal neither
// ever stops the command: the call returns and the command runs on. With
// StopSignal ("SIGTERM", "SIGINT", a number), a timeout of the call or the
// caller going away stops the running command as an exec's is stopped:
// StopSignal to its job (the terminal's foreground process group), SIGKILL
// StopGrace later (default 2 s, a duration string or seconds), and, should
// the shell still not be back at its prompt, a fresh shell. MaxOutputBytes
// defaults to 64 KiB.
type RunRequest struct {
	Command          string       `json:"command"`
	IsInput          bool         `json:"is_input,omitempty"`
	TimeoutS         float64      `json:"timeout_s,omitempty"`
	NoOutputTimeoutS *float64     `json:"no_output_timeout_s,omitempty"`
	MaxOutputBytes   int          `json:"max_output_bytes,omitempty"`
	StopSignal       string       `json:"stop_signal,omitempty"`
	StopGrace        sbx.Duration `json:"stop_grace,omitempty"`
}

// Session run statuses.
const (
	StatusCompleted = "completed" // the command ended; ExitCode and Cwd are set
	StatusRunning   = "running"   // a timeout passed; the command keeps running
	StatusBusy      = "busy"      // another command runs; this one was not run
	StatusExited    = "exited"    // the shell itself ended (exit, set -e); the next run starts a fresh shell
)

// Reasons for StatusRunning.
const (
	ReasonTimeout  = "timeout"
	ReasonNoOutput = "no_output"
)

// RunResult is the reply of POST /v1/sessions/{id}/run. Output is what the
// terminal showed since the previous reply, with "\n" line endings and no
// echoed command, prompt or marker. Notice explains anything unusual, such
// as a shell restarted after the previous one exited.
type RunResult struct {
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Output    string `json:"output"`
	Cwd       string `json:"cwd,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Truncated bool   `json:"truncated"`
	Notice    string `json:"notice,omitempty"`
}

// Edit commands of POST /v1/files/edit.
const (
	EditView       = "view"
	EditCreate     = "create"
	EditStrReplace = "str_replace"
	EditInsert     = "insert"
	EditUndo       = "undo_edit"
)

// EditRequest is the body of POST /v1/files/edit. InsertLine is the line
// after which NewStr goes (0 = the top). ViewRange is [first, last], 1-based,
// last -1 meaning the end of the file.
type EditRequest struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	FileText   *string `json:"file_text,omitempty"`
	OldStr     *string `json:"old_str,omitempty"`
	NewStr     *string `json:"new_str,omitempty"`
	InsertLine *int    `json:"insert_line,omitempty"`
	ViewRange  []int   `json:"view_range,omitempty"`
}

// EditResult is the reply of a successful edit: Output is the text a
// terminal user would read (numbered lines for view, a snippet of the
// changed region otherwise).
type EditResult struct {
	Path   string `json:"path"`
	Output string `json:"output"`
}

// Entry is one directory entry of GET /v1/fs/list. Type is "file", "dir",
// "symlink" or "other"; Mode is the octal permission string ("0755").
type Entry struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Size  int64  `json:"size"`
	Mode  string `json:"mode"`
	Mtime string `json:"mtime"`
}

// Listing is the reply of GET /v1/fs/list: directories first, then the
// rest, each sorted by name.
type Listing struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated"`
}

// ArchiveResult is the reply of PUT /v1/fs/archive.
type ArchiveResult struct {
	Path    string `json:"path"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// WriteResult is the reply of PUT /v1/files.
type WriteResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Info is the reply of GET /v1/info: resource use as seen inside the
// sandbox. Limits are 0 when none is set.
type Info struct {
	CPU    CPUInfo    `json:"cpu"`
	Memory MemoryInfo `json:"memory"`
	Disk   DiskInfo   `json:"disk"`
	Pids   PidsInfo   `json:"pids"`
}

// CPUInfo reports CPU count, load and the cgroup's CPU time.
type CPUInfo struct {
	Count  int     `json:"count"`
	Load1  float64 `json:"load1"`
	UsageS float64 `json:"usage_s"`
	Limit  float64 `json:"limit_cpus,omitempty"`
}

// MemoryInfo reports memory in bytes: the cgroup's use and limit when a
// cgroup is visible, the system's otherwise.
type MemoryInfo struct {
	TotalBytes     uint64 `json:"total_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
	UsedBytes      uint64 `json:"used_bytes"`
	LimitBytes     uint64 `json:"limit_bytes,omitempty"`
}

// DiskInfo reports the file system holding the working directory.
type DiskInfo struct {
	Path       string `json:"path"`
	TotalBytes uint64 `json:"total_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`
}

// PidsInfo reports the number of processes and the cgroup's pids limit.
type PidsInfo struct {
	Current int    `json:"current"`
	Limit   uint64 `json:"limit,omitempty"`
}
