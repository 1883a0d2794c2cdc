package sbx

import (
	"encoding/json"
	"io"
	"time"
)

// ExecRequest is a command to run in a running sandbox: either Argv or
// Command (run with /bin/sh -c). Zero values mean the sandbox's defaults.
// It is also the body of the executor's POST /v1/exec.
type ExecRequest struct {
	Argv    []string `json:"argv,omitempty"`
	Command string   `json:"command,omitempty"`
	// Env is KEY=VALUE entries set for this command over the sandbox's
	// environment, in the form of Options.Env (a later entry of a key
	// wins). In JSON env, an object {"KEY": "VALUE"}.
	Env []string `json:"-"`
	Cwd string   `json:"cwd,omitempty"`
	// User is "name", "uid" or "uid:gid"; empty is the sandbox's user.
	User  string `json:"user,omitempty"`
	Stdin string `json:"stdin,omitempty"`
	// Timeout stops the command after this long (StopSignal, then
	// SIGKILL): the result says TimedOut, exit code ExitTimeout; 0 never.
	// In JSON timeout_s, a number of seconds.
	Timeout time.Duration `json:"-"`
	// StopSignal is what the command's process group gets when the call
	// ends before the command does (its context is cancelled, the caller
	// disconnects) or Timeout passes: a name ("SIGTERM", the default;
	// "SIGINT") or number. What is left of the group is killed (SIGKILL)
	// StopGrace later; "SIGKILL" kills at once.
	StopSignal string `json:"stop_signal,omitempty"`
	// StopGrace is the time between StopSignal and SIGKILL (0:
	// DefaultExecStopGrace). In JSON stop_grace, a duration string ("5s")
	// or a number of seconds.
	StopGrace time.Duration `json:"-"`
	// MaxOutputBytes caps the output kept of each stream.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// Detach starts the command and returns at once, as docker exec -d:
	// the result has only its Pid (inside the sandbox), or the exit code
	// 127/126 and the reason on Stderr when it cannot start. The command
	// gets no input or output and runs on after the caller goes, until it
	// ends, Timeout passes or the sandbox stops. Stdin is refused.
	Detach bool `json:"detach,omitempty"`
}

// WriteOutput is an Exec callback that writes the command's output to
// stdout and stderr as it comes, as RunOptions' writers take a run's: pass
// it as Exec's onOutput (the result's Stdout and Stderr are then empty).
// An error of a writer ends the exec (and stops the command).
func WriteOutput(stdout, stderr io.Writer) func(ExecFrame) error {
	return func(f ExecFrame) error {
		var err error
		switch f.Type {
		case FrameStdout:
			_, err = io.WriteString(stdout, f.Data)
		case FrameStderr:
			_, err = io.WriteString(stderr, f.Data)
		}
		return err
	}
}

// DefaultExecStopGrace is how long a command stopped at its timeout or by
// a cancelled call has between ExecRequest.StopSignal and SIGKILL.
const DefaultExecStopGrace = 2 * time.Second

// execRequestJSON is ExecRequest without its methods, for the JSON codec.
type execRequestJSON ExecRequest

// execRequestWire is an ExecRequest's JSON: env an object, the timeout
// in seconds, the grace a duration string.
type execRequestWire struct {
	execRequestJSON
	Env       map[string]string `json:"env,omitempty"`
	TimeoutS  float64           `json:"timeout_s,omitempty"`
	StopGrace Duration          `json:"stop_grace,omitempty"`
}

// MarshalJSON writes Env as an object, Timeout as timeout_s (seconds) and
// StopGrace as a duration string. An Env entry that is not KEY=VALUE is
// ErrInvalid.
func (r ExecRequest) MarshalJSON() ([]byte, error) {
	env, err := EnvMap(r.Env)
	if err != nil {
		return nil, err
	}
	return json.Marshal(execRequestWire{execRequestJSON(r), env, r.Timeout.Seconds(), Duration(r.StopGrace)})
}

// UnmarshalJSON reads an ExecRequest, refusing unknown fields; env is an
// object, timeout_s a number of seconds, stop_grace a duration string or
// a number of seconds.
func (r *ExecRequest) UnmarshalJSON(data []byte) error {
	var v execRequestWire
	if err := strictUnmarshal(data, &v); err != nil {
		return err
	}
	*r = ExecRequest(v.execRequestJSON)
	r.Env = envList(v.Env)
	r.Timeout = secondsDuration(v.TimeoutS)
	r.StopGrace = time.Duration(v.StopGrace)
	return nil
}

// ExecResult is how a command ended. Signal names the signal that ended it
// ("SIGKILL") or is "" (the field is always present); ExitCode is then
// 128+the signal's number, as a shell reports it.
//
// UserTimeS and SysTimeS (CPUTimeS is their sum) are the CPU time of the
// command and of the children it waited for, and MemoryPeakBytes the
// largest resident set among them, as wait4 reports them; processes the
// command left running are not counted. They are 0 for a command that
// did not start.
type ExecResult struct {
	ExitCode        int     `json:"exit_code"`
	Signal          string  `json:"signal"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	TimedOut        bool    `json:"timed_out"`
	Truncated       bool    `json:"truncated"`
	DurationS       float64 `json:"duration_s"`
	CPUTimeS        float64 `json:"cpu_time_s"`
	UserTimeS       float64 `json:"user_time_s"`
	SysTimeS        float64 `json:"sys_time_s"`
	MemoryPeakBytes uint64  `json:"memory_peak_bytes"`
	// OOMKilled says the kernel's OOM killer ended the command (it died of
	// SIGKILL, not at its timeout, while the sandbox's cgroup counted an OOM
	// kill). A command that ran beside another one killed that way at the
	// same moment may be reported alike. The local backend reads the count
	// from the host's cgroup; the executor reports it to remote callers.
	OOMKilled bool `json:"oom_killed"`
	// Pid is a detached command's pid inside the sandbox (Detach).
	Pid int `json:"pid,omitempty"`
}

// Frame types of a streamed exec.
const (
	FrameStdout = "stdout"
	FrameStderr = "stderr"
	FrameResult = "result"
	FrameError  = "error"
)

// ExecFrame is one piece of a streamed exec (one NDJSON line on the
// wire): output as it is produced, then exactly one result or error frame.
type ExecFrame struct {
	Type   string      `json:"type"`
	Data   string      `json:"data,omitempty"`
	Result *ExecResult `json:"result,omitempty"`
	Error  *ErrorBody  `json:"error,omitempty"`
}

// ErrorBody is the body of every error reply of the REST server and of a
// sandbox's executor, inside {"error": ...}: a stable code and a message
// that says what to do. Lines lists the 1-based line numbers of the
// matches of an ambiguous edit (code "multiple_matches").
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Lines   []int  `json:"lines,omitempty"`
}

// AttachOptions describe an interactive command in a running sandbox: its
// input is streamed, and with Tty it gets a terminal of its own that
// follows Resize. ExecRequest's Stdin and MaxOutputBytes do not apply.
type AttachOptions struct {
	ExecRequest
	Tty bool
	// Stdin is copied to the command until EOF (nil: no input).
	Stdin io.Reader
	// Stdout and Stderr receive the output; with Tty all of it goes to
	// Stdout.
	Stdout, Stderr io.Writer
	// Size is the terminal's initial size (columns, rows; default 80x24);
	// Resize carries later sizes.
	Size   [2]uint16
	Resize <-chan [2]uint16
}
