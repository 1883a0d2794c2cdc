package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// LogFrames is a Logs callback (sbx.TailLogs) writing a main command's
// output as sbx logs does: stdout and stderr to theirs, a gap in the held
// window as a note on stderr.
func LogFrames(stdout, stderr io.Writer) func(sbx.LogFrame) error {
	return func(f sbx.LogFrame) error {
		var err error
		switch f.Type {
		case sbx.LogStdout:
			_, err = io.WriteString(stdout, f.Data)
		case sbx.LogStderr:
			_, err = io.WriteString(stderr, f.Data)
		case sbx.LogGap:
			_, err = fmt.Fprintf(stderr, "sbx: %d bytes of output before this were dropped (the sandbox keeps a bounded window)\n", f.Lost)
		}
		return err
	}
}

// LogView selects and marks a main command's output as docker logs does:
// only what was written between Since and Until (zero: no bound; output
// without a time is kept), each line after its time (RFC 3339, UTC) with
// Timestamps. A line's time is that of the read that brought its start.
type LogView struct {
	Timestamps   bool
	Since, Until time.Time
}

// LogFramesView is LogFrames showing only what v selects, as v marks it.
func LogFramesView(stdout, stderr io.Writer, v LogView) func(sbx.LogFrame) error {
	plain := LogFrames(stdout, stderr)
	atStart := map[string]bool{sbx.LogStdout: true, sbx.LogStderr: true}
	return func(f sbx.LogFrame) error {
		if f.Type != sbx.LogStdout && f.Type != sbx.LogStderr {
			return plain(f)
		}
		if !f.Time.IsZero() && (!v.Since.IsZero() && f.Time.Before(v.Since) || !v.Until.IsZero() && f.Time.After(v.Until)) {
			return nil
		}
		if !v.Timestamps || f.Time.IsZero() {
			return plain(f)
		}
		prefix := f.Time.UTC().Format(time.RFC3339Nano) + " "
		var b strings.Builder
		for _, line := range strings.SplitAfter(f.Data, "\n") {
			if line == "" {
				continue
			}
			if atStart[f.Type] {
				b.WriteString(prefix)
			}
			b.WriteString(line)
			atStart[f.Type] = strings.HasSuffix(line, "\n")
		}
		f.Data = b.String()
		return plain(f)
	}
}

// Exit writes how a main command ended as sbx wait does: its exit code on
// stdout; an OOM kill and an error as notes naming ref on stderr.
func Exit(stdout, stderr io.Writer, ref string, exit *sbx.Exit) {
	fmt.Fprintln(stdout, exit.ExitCode)
	if exit.OOMKilled {
		fmt.Fprintf(stderr, "sbx: %s: the command was killed for lack of memory (OOM)\n", ref)
	}
	if exit.Error != "" {
		fmt.Fprintf(stderr, "sbx: %s: %s\n", ref, exit.Error)
	}
}

// ExecEnd writes a note on stderr when an exec's command was killed by the
// kernel's OOM killer (its exit code alone, 137, does not say so).
func ExecEnd(stderr io.Writer, res sbx.ExecResult) {
	if res.OOMKilled {
		fmt.Fprintln(stderr, "sbx: the command was killed for lack of memory (OOM): the sandbox reached its memory limit")
	}
}

// Events is an Events callback writing each event as a line of text
// (Event.String) or, with format "json", as one JSON object a line.
func Events(w io.Writer, format string) func(sbx.Event) error {
	return func(e sbx.Event) error {
		if format == "json" {
			return json.NewEncoder(w).Encode(e)
		}
		_, err := fmt.Fprintln(w, e)
		return err
	}
}

// Changes writes a sandbox's changes as sbx diff does: "KIND PATH" lines,
// or with format "json" an array ([] for none).
func Changes(w io.Writer, changes []sbx.Change, format string) error {
	if format == "json" {
		if changes == nil {
			changes = []sbx.Change{}
		}
		return JSON(w, changes)
	}
	for _, c := range changes {
		if _, err := fmt.Fprintf(w, "%s %s\n", c.Kind, c.Path); err != nil {
			return err
		}
	}
	return nil
}
