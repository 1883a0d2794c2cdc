package api

import "time"

// The sandbox's service: one long-running main command that belongs to no
// request (an OpenHands Agent Server, a `sbx run -d` command). The executor
// starts it, restarts it per its policy, keeps its latest output in a
// bounded ring and reports how it ended.
const (
	// PathService: POST starts the service (ServiceSpec → ServiceStatus),
	// GET reports it (ServiceStatus; 404 when none was started).
	PathService = "/v1/service"
	// PathServiceLogs: GET streams the service's output as NDJSON
	// LogFrames. Query: since=OFFSET (absolute byte offset, default 0),
	// tail_bytes=N (start N bytes before the end instead), follow=1 (keep
	// streaming until the service has ended for good).
	PathServiceLogs = "/v1/service/logs"
	// PathServiceWait: POST waits until the service has ended for good
	// (exited and not going to restart) and returns its ServiceStatus.
	PathServiceWait = "/v1/service/wait"
	// PathServiceSignal: POST sends a ServiceSignal to the service's
	// process group; the restart policy still applies.
	PathServiceSignal = "/v1/service/signal"
	// PathServiceStop: POST stops the service for good (ServiceStop →
	// ServiceStatus): SIGTERM to its process group, SIGKILL after the
	// timeout, and no restart.
	PathServiceStop = "/v1/service/stop"
)

// Restart policies of a service.
const (
	RestartNo        = "no"         // never restart (the default)
	RestartOnFailure = "on-failure" // restart after a non-zero exit or a signal
	RestartAlways    = "always"     // restart after any exit
)

// Service log limits.
const (
	// DefaultServiceLogBytes is the default ring size of a service's output.
	DefaultServiceLogBytes = 1 << 20
	// MaxServiceLogBytes caps ServiceSpec.LogBytes.
	MaxServiceLogBytes = 8 << 20
)

// ServiceSpec is the body of POST /v1/service. Argv is run directly (no
// shell); Env, Cwd and User work as in ExecRequest. Restart is RestartNo
// (default), RestartOnFailure or RestartAlways; MaxRestarts bounds the
// restarts after failures (0: no bound). LogBytes is the size of the
// output ring (default DefaultServiceLogBytes, at most
// MaxServiceLogBytes). CreateCwd creates Cwd when it is missing, every
// new directory owned by the service's user (an existing one is left as
// it is). Starting a service while one runs is a conflict;
// starting one after the previous ended replaces it and keeps its log.
type ServiceSpec struct {
	Argv        []string          `json:"argv"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	CreateCwd   bool              `json:"create_cwd,omitempty"`
	User        string            `json:"user,omitempty"`
	Restart     string            `json:"restart,omitempty"`
	MaxRestarts int               `json:"max_restarts,omitempty"`
	LogBytes    int               `json:"log_bytes,omitempty"`
}

// Service states.
const (
	ServiceRunning    = "running"    // the process runs
	ServiceRestarting = "restarting" // it exited and restarts after a back-off
	ServiceExited     = "exited"     // it ended for good
)

// ServiceExit is how one run of the service ended. ExitCode is 128+n for
// signal n, as a shell reports it; Signal names it ("SIGKILL") or is "".
// Error says why the process could not start at all (ExitCode is then 127
// or 126).
type ServiceExit struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// ServiceStatus is the reply of GET /v1/service and of the calls that
// change it. Pid is the service's pid inside the sandbox while it runs.
// Exit is the latest run's end (nil while the first run is running);
// Restarts counts the restarts so far and RecentExits holds the last few
// ends, oldest first. LogEnd is the offset after the last byte of output.
type ServiceStatus struct {
	State       string        `json:"state"`
	Argv        []string      `json:"argv"`
	Restart     string        `json:"restart"`
	Pid         int           `json:"pid,omitempty"`
	StartedAt   time.Time     `json:"started_at,omitzero"` // of the current or latest run
	Restarts    int           `json:"restarts"`
	Exit        *ServiceExit  `json:"exit,omitempty"`
	RecentExits []ServiceExit `json:"recent_exits,omitempty"`
	LogEnd      int64         `json:"log_end"`
}

// ServiceSignal is the body of POST /v1/service/signal: a signal name
// ("SIGTERM", "TERM") or number ("15").
type ServiceSignal struct {
	Signal string `json:"signal"`
}

// ServiceStop is the body of POST /v1/service/stop: Signal is sent first
// (default SIGTERM), SIGKILL after TimeoutS seconds (default 10).
type ServiceStop struct {
	Signal   string  `json:"signal,omitempty"`
	TimeoutS float64 `json:"timeout_s,omitempty"`
}

// Frame types of GET /v1/service/logs.
const (
	LogStdout = "stdout" // output of the service on its stdout
	LogStderr = "stderr" // output on its stderr
	LogGap    = "gap"    // Lost bytes from Offset on are no longer held
	LogEnd    = "end"    // the last frame: Offset is where to resume; Service is set
)

// LogFrame is one line of GET /v1/service/logs. Offset is the absolute
// offset of Data's first byte in the service's output (for "gap", of the
// first lost byte; for "end", the offset to resume from); Time is when
// the output was read.
type LogFrame struct {
	Type    string         `json:"type"`
	Offset  int64          `json:"offset"`
	Data    string         `json:"data,omitempty"`
	Time    time.Time      `json:"time,omitzero"`
	Lost    int64          `json:"lost,omitempty"`
	Service *ServiceStatus `json:"service,omitempty"`
}
