package render

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	units "github.com/docker/go-units"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// Report writes a one-shot run's report as sbx run --stats prints it on
// stderr: status, exit code and signal number, times, peak memory, OOM
// kill, timeout and peak pids.
func Report(w io.Writer, rep *sbx.Report) {
	pids := "n/a"
	if rep.PidsPeak != nil {
		pids = fmt.Sprint(*rep.PidsPeak)
	}
	fmt.Fprintf(w, "status: %s  exit: %d  signal: %d\nwall: %.3fs  cpu: %.3fs (user %.3fs, sys %.3fs)\npeak memory: %s  oom killed: %v  timed out: %v  peak pids: %s\n",
		rep.Status, rep.ExitCode, signalNumber(rep.Signal), rep.WallTimeS, rep.CPUTimeS, rep.UserTimeS, rep.SysTimeS,
		units.BytesSize(float64(rep.MemoryPeakBytes)), rep.OOMKilled, rep.TimedOut, pids)
}

// WriteReportFile writes the report as indented JSON to path (sbx run
// --report).
func WriteReportFile(path string, rep *sbx.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write --report: %w", err)
	}
	return nil
}

// signalNumber is the number of a signal name, 0 for none.
func signalNumber(name string) int {
	if name == "" {
		return 0
	}
	return int(unix.SignalNum(name))
}
