// Package initstatus is the host's side of the one-shot init's status
// pipe: sbx-init (cmd/sbx-init/c, C, PID 1 of every one-shot run) writes
// how the command ended as one JSON line, and the host reads it as it is
// written and trusts it only where it agrees with the kernel's wait status.
package initstatus

import (
	"encoding/json"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/termsafe"
)

// Status is how the command ended: the one JSON line sbx-init writes to its
// status descriptor (--status-fd).
type Status struct {
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal,omitempty"`
	ExecError string `json:"exec_error,omitempty"` // the command could not be started
}

// Exit codes of commands that could not be started, as shells use them.
const (
	ExitCannotExec = 126
	ExitNotFound   = 127
)

// maxStatusBytes caps what the host reads of the status pipe.
const maxStatusBytes = 4096

// StatusReader reads the status pipe on the host side as it is written, so
// that the init can never block on a full pipe, and keeps at most
// maxStatusBytes of it.
type StatusReader struct {
	done chan struct{}
	data []byte
}

// ReadStatus starts reading r (the read end of the status pipe) until EOF.
func ReadStatus(r io.Reader) *StatusReader {
	s := &StatusReader{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.data, _ = io.ReadAll(io.LimitReader(r, maxStatusBytes))
		_, _ = io.Copy(io.Discard, r)
	}()
	return s
}

// Status returns the status the init wrote, waiting at most wait for the
// pipe to close after the init exited; nil when there is none, it is
// malformed or the pipe stays open.
func (s *StatusReader) Status(wait time.Duration) *Status {
	select {
	case <-s.done:
	case <-time.After(wait):
		return nil
	}
	var st Status
	if json.Unmarshal(s.data, &st) != nil {
		return nil
	}
	return &st
}

// Outcome is how a one-shot command ended, as the host establishes it.
type Outcome struct {
	ExitCode  int
	Signal    int    // the signal that killed the command, 0 if none
	ExecError string // why the command could not be started, sanitized
}

// Decide establishes the outcome from the init's wait status, which the
// kernel reports to the host and nothing in the sandbox can forge: the
// init exits with the command's exit code (128+N when signal N killed
// it). The init's status only adds what the exit code cannot say (a
// signal rather than an exit code of 128+N, why a command could not be
// started), and only when it agrees with the kernel; a status that
// disagrees is ignored. An init killed by a signal (sbx's own kill on a
// timeout or cancellation) reports that signal.
func Decide(ws unix.WaitStatus, st *Status) Outcome {
	if ws.Signaled() {
		return Outcome{ExitCode: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	out := Outcome{ExitCode: ws.ExitStatus()}
	if st == nil || st.ExitCode != out.ExitCode {
		return out
	}
	switch {
	case st.Signal > 0 && st.Signal < 65 && out.ExitCode == 128+st.Signal && st.ExecError == "":
		out.Signal = st.Signal
	case st.Signal == 0 && st.ExecError != "" && (out.ExitCode == ExitCannotExec || out.ExitCode == ExitNotFound):
		out.ExecError = termsafe.String(st.ExecError, 512)
	}
	return out
}
