package sbx

import (
	"io"
	"os"
	"time"
)

// RunOptions describe a one-shot run: one command in a fresh sandbox that
// is removed when the command exits (create, start, wait and remove).
type RunOptions struct {
	// Options describe the sandbox. Options.Cmd is the command: with an
	// image it replaces the image's Cmd (Entrypoint + Cmd run, as docker
	// runs them); with Rootfs or in host mode (neither Image nor Rootfs,
	// local only) it is the whole command line. Name, Labels and TTL are
	// for long-lived sandboxes and must be empty.
	Options
	// Entrypoint replaces the image's Entrypoint when not nil (an empty,
	// non-nil slice clears it), dropping the image's Cmd as docker does.
	Entrypoint []string
	// Timeout is a wall-clock limit; when it passes every process of the
	// sandbox is killed and the report says "timeout". Zero is none.
	Timeout time.Duration

	// Tty gives the command a terminal; all output then goes to Stdout.
	Tty bool
	// Stdin is the command's input (nil: /dev/null); Stdout and Stderr
	// receive its output (nil: discarded).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ConsoleSize is the terminal's initial size with Tty (columns,
	// rows); Resize carries later sizes.
	ConsoleSize [2]uint16
	Resize      <-chan [2]uint16
	// Signals are passed on to the command (SIGINT or SIGTERM its caller
	// received). Cancelling Run's context kills the sandbox instead.
	Signals <-chan os.Signal
	// PullProgress, if set, receives the progress of pulling the image.
	PullProgress func(PullProgress)
}

// RunStatus says how a run ended.
type RunStatus string

// The statuses of a Report.
const (
	RunOK          RunStatus = "ok"
	RunNonzeroExit RunStatus = "nonzero_exit"
	RunSignaled    RunStatus = "signaled"
	RunOOM         RunStatus = "oom"
	RunTimeout     RunStatus = "timeout"
	RunError       RunStatus = "error"
)

// Exit codes that sbx gives when the command's own does not apply, as
// docker and podman do.
const (
	ExitTimeout    = 124 // Timeout passed
	ExitSbxFailed  = 125 // sbx itself failed
	ExitCannotExec = 126 // the command could not be executed
	ExitNotFound   = 127 // the command was not found
	ExitOOM        = 137 // the command was OOM-killed
)

// Report is what a run used and how it ended, in the spirit of isolate's
// meta file. Run returns an error only when sbx itself failed; the
// command's own failures are here.
type Report struct {
	Status RunStatus `json:"status"`
	// ExitCode is the command's, 128+N when a signal N ended it, or one
	// of the Exit* codes.
	ExitCode int `json:"exit_code"`
	// Signal is the name of the signal that ended the command ("SIGKILL"),
	// or "".
	Signal          string  `json:"signal"`
	WallTimeS       float64 `json:"wall_time_s"`
	CPUTimeS        float64 `json:"cpu_time_s"`
	UserTimeS       float64 `json:"user_time_s"`
	SysTimeS        float64 `json:"sys_time_s"`
	MemoryPeakBytes uint64  `json:"memory_peak_bytes"`
	OOMKilled       bool    `json:"oom_killed"`
	TimedOut        bool    `json:"timed_out"`
	// PidsPeak is absent where the host does not track it.
	PidsPeak *uint64 `json:"pids_peak,omitempty"`
	// Error says why the command could not run (Status "error").
	Error string `json:"error,omitempty"`
	// Timings break down where the run's time went.
	Timings Timings `json:"timings"`
}

// Timings are the durations of the steps of a run, in seconds. NetworkS is
// the bridge network's attach (FromPool: its namespace came ready from
// the pool); UserNSS leasing an id range and making the user namespace
// (Options.UserNS private); RootfsS the root file system after them (the
// user namespace's included).
type Timings struct {
	NetworkS  float64 `json:"network_s"`
	FromPool  bool    `json:"from_pool"`
	UserNSS   float64 `json:"userns_s,omitempty"`
	RootfsS   float64 `json:"rootfs_s"`
	StartS    float64 `json:"start_s"`
	CommandS  float64 `json:"command_s"`
	TeardownS float64 `json:"teardown_s"`
	// Pool says whether a warm pool's member ran the command: "hit,
	// NAME", or "miss, REASON" (see CreateTimings.Pool).
	Pool string `json:"pool,omitempty"`
}
