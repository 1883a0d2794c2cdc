package api

import "time"

// The sandbox's main command: one long-running process that belongs to no
// request (an OpenHands Agent Server, a `sbx run -d` command). The executor
// starts it, restarts it per its policy, keeps its latest output in a
// bounded ring and reports how it ended.
const (
	// PathMainCmd: POST starts the main command (MainCmdSpec → MainCmdStatus),
	// GET reports it (MainCmdStatus; 404 when none was started).
	PathMainCmd = "/v1/maincmd"
	// PathMainCmdLogs: GET streams the main command's output as NDJSON
	// LogFrames. Query: since=OFFSET (absolute byte offset, default 0),
	// tail_bytes=N (start N bytes before the end instead), follow=1 (keep
	// streaming until the main command has ended for good).
	PathMainCmdLogs = "/v1/maincmd/logs"
	// PathMainCmdWait: POST waits until the main command has ended for good
	// (exited and not going to restart) and returns its MainCmdStatus.
	PathMainCmdWait = "/v1/maincmd/wait"
	// PathMainCmdSignal: POST sends a MainCmdSignal to the main command's
	// process group; the restart policy still applies.
	PathMainCmdSignal = "/v1/maincmd/signal"
	// PathMainCmdStop: POST stops the main command for good (MainCmdStop →
	// MainCmdStatus): SIGTERM to its process group, SIGKILL after the
	// timeout, and no restart.
	PathMainCmdStop = "/v1/maincmd/stop"
)

// Restart policies of a main command.
const (
	RestartNo        = "no"         // never restart (the default)
	RestartOnFailure = "on-failure" // restart after a non-zero exit or a signal
	RestartAlways    = "always"     // restart after any exit
)

// Main command log limits.
const (
	// DefaultMainCmdLogBytes is the default ring size of a main command's output.
	DefaultMainCmdLogBytes = 1 << 20
	// MaxMainCmdLogBytes caps MainCmdSpec.LogBytes.
	MaxMainCmdLogBytes = 8 << 20
)

// MainCmdSpec is the body of POST /v1/maincmd. Argv is run directly (no
// shell); Env, Cwd and User work as in ExecRequest. Restart is RestartNo
// (default), RestartOnFailure or RestartAlways; MaxRestarts bounds the
// restarts after failures (0: no bound). LogBytes is the size of the
// output ring (default DefaultMainCmdLogBytes, at most
// MaxMainCmdLogBytes). CreateCwd creates Cwd when it is missing, every
// new directory owned by the main command's user (an existing one is left as
// it is). Starting a main command while one runs is a conflict;
// starting one after the previous ended replaces it and keeps its log.
type MainCmdSpec struct {
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	CreateCwd   bool              `json:"create_cwd,omitempty"`
	User        string            `json:"user,omitempty"`
	Restart     string            `json:"restart,omitempty"`
	MaxRestarts int               `json:"max_restarts,omitempty"`
	LogBytes    int               `json:"log_bytes,omitempty"`
}

// Main command states.
const (
	MainCmdRunning    = "running"    // the process runs
	MainCmdRestarting = "restarting" // it exited and restarts after a back-off
	MainCmdExited     = "exited"     // it ended for good
)

// MainCmdExit is how one run of the main command ended. ExitCode is 128+n for
// signal n, as a shell reports it; Signal names it ("SIGKILL") or is "".
// Error says why the process could not start at all (ExitCode is then 127
// or 126).
type MainCmdExit struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// MainCmdStatus is the reply of GET /v1/maincmd and of the calls that
// change it. Pid is the main command's pid inside the sandbox while it runs.
// Exit is the latest run's end (nil while the first run is running);
// Restarts counts the restarts so far and RecentExits holds the last few
// ends, oldest first. LogEnd is the offset after the last byte of output.
type MainCmdStatus struct {
	State       string        `json:"state"`
	Argv        []string      `json:"argv"`
	Restart     string        `json:"restart"`
	Pid         int           `json:"pid,omitempty"`
	StartedAt   time.Time     `json:"started_at,omitzero"` // of the current or latest run
	Restarts    int           `json:"restarts"`
	Exit        *MainCmdExit  `json:"exit,omitempty"`
	RecentExits []MainCmdExit `json:"recent_exits,omitempty"`
	LogEnd      int64         `json:"log_end"`
}

// MainCmdSignal is the body of POST /v1/maincmd/signal: a signal name
// ("SIGTERM", "TERM") or number ("15").
type MainCmdSignal struct {
	Signal string `json:"signal"`
}

// MainCmdStop is the body of POST /v1/maincmd/stop: Signal is sent first
// (default SIGTERM), SIGKILL after TimeoutS seconds (default 10).
type MainCmdStop struct {
	Signal   string  `json:"signal,omitempty"`
	TimeoutS float64 `json:"timeout_s,omitempty"`
}

// Frame types of GET /v1/maincmd/logs.
const (
	LogStdout = "stdout" // output of the main command on its stdout
	LogStderr = "stderr" // output on its stderr
	LogGap    = "gap"    // Lost bytes from Offset on are no longer held
	LogEnd    = "end"    // the last frame: Offset is where to resume; Main command is set
)

// LogFrame is one line of GET /v1/maincmd/logs. Offset is the absolute
// offset of Data's first byte in the main command's output (for "gap", of the
// first lost byte; for "end", the offset to resume from); Time is when
// the output was read.
type LogFrame struct {
	Type    string         `json:"type"`
	Offset  int64          `json:"offset"`
	Data    string         `json:"data,omitempty"`
	Time    time.Time      `json:"time,omitzero"`
	Lost    int64          `json:"lost,omitempty"`
	MainCmd *MainCmdStatus `json:"main_cmd,omitempty"`
}
