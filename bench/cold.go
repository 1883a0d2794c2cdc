package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// Compare selects the runtimes measured next to sbx and how to reach them.
type Compare struct {
	// Runtimes are anchor names: see AnchorNames.
	Runtimes []string
	// DockerHost is the docker daemon's socket, e.g.
	// unix:///var/run/docker.sock; "" uses $DOCKER_HOST or docker's default.
	DockerHost string
	// StartDockerd starts a private dockerd for the docker anchor when no
	// daemon answers at DockerHost, and stops it afterwards.
	StartDockerd bool
}

// ColdScenario measures one-shot `sbx run --rootfs DIR CMD` as its own
// process, what a CI job sees, against the anchors' one-shot runs.
func ColdScenario(w Workload, c Compare) *Scenario {
	what := "--rootfs DIR"
	if w.Image != "" {
		what = w.Image
	}
	sc := &Scenario{
		Name:        "cold",
		Description: "one-shot `sbx run " + what + " " + strings.Join(w.Args, " ") + "` as a fresh process, until it has exited and everything is torn down",
		Unit:        "ms",
		// "sbx" runs in the host's user namespace, as the anchors do; the
		// same run in a user namespace of its own (sbx's default) says
		// what that costs (docs/security.md).
		// And the same run claiming a warm pool's member.
		Subjects: []Subject{&sbxCold{w: w}, &sbxCold{w: w, userns: true}, &sbxPooledRun{w: w}},
		Probes:   componentProbes(w),
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, NewAnchor(name, w, c))
	}
	return sc
}

// sbxCold runs the sbx CLI once per iteration and reads its report for the
// breakdown.
type sbxCold struct {
	w      Workload
	dir    string
	userns bool // --userns private
}

// UserNSSubject names the cold run in a user namespace of its own.
const UserNSSubject = "sbx --userns private"

func (s *sbxCold) Name() string {
	if s.userns {
		return UserNSSubject
	}
	return "sbx"
}

func (s *sbxCold) Setup(ctx context.Context) (Info, error) {
	info := Info{Command: "sbx run --rootfs DIR -- " + strings.Join(s.w.Args, " ")}
	if s.w.Image != "" {
		info.Command = "sbx run --pull never " + s.w.Image + " " + strings.Join(s.w.Args, " ")
	}
	out, err := runCmd(ctx, 10*time.Second, s.w.SbxBin, "version")
	if err != nil {
		return info, err
	}
	info.Version = firstLine(out)
	if i := strings.Index(info.Version, ","); i > 0 { // drop the Go version and platform
		info.Version = info.Version[:i] + ")"
	}
	s.dir, err = os.MkdirTemp("", "sbx-bench-cold-")
	return info, err
}

func (s *sbxCold) Once(ctx context.Context) (Sample, error) {
	reportPath := filepath.Join(s.dir, "report.json")
	userns := "host"
	if s.userns {
		userns = "private"
	}
	args := []string{"--run-root", s.w.RunRoot, "run", "--userns", userns, "--rootfs", s.w.Rootfs, "--report", reportPath, "--"}
	if s.w.Image != "" {
		args = []string{"--root", s.w.StateRoot, "--run-root", s.w.RunRoot, "run", "--userns", userns, "--pull", "never", "--report", reportPath, s.w.Image}
	}
	cmd := exec.CommandContext(ctx, s.w.SbxBin, append(args, s.w.Args...)...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	total := time.Since(t0)
	if err != nil {
		return Sample{}, fmt.Errorf("sbx run: %w: %s", err, lastLines(string(out), 3))
	}
	// The command prints nothing; anything sbx printed is a warning, such
	// as a failed cleanup, that must not pass unseen.
	if len(bytes.TrimSpace(out)) > 0 {
		return Sample{}, fmt.Errorf("sbx run warned: %s", lastLines(string(out), 3))
	}
	data, err := os.ReadFile(reportPath)
	if err != nil {
		return Sample{}, fmt.Errorf("sbx run wrote no report: %w", err)
	}
	var rep sbx.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return Sample{}, fmt.Errorf("sbx run report: %w", err)
	}
	rest := "sbx process: exec, flags, report, exit"
	if s.w.Image != "" {
		rest = "sbx process: exec, flags, image lookup, report, exit"
	}
	return Sample{Value: Ms(total), Phases: runPhases(rep.Timings, total, rest)}, nil
}

func (s *sbxCold) Close() error {
	if s.dir == "" {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// Phase names of a run, shared by the cold and lib scenarios.
const (
	PhaseUserNS   = "user namespace: lease a range, make the namespace"
	PhaseRootfs   = "rootfs: overlay on tmpfs"
	PhaseStart    = "container start: cgroup, namespaces, mounts, init re-exec"
	PhaseCommand  = "command: sandbox init, seccomp, exec, exit"
	PhaseTeardown = "teardown: kill, cgroup and mount removal"
)

// runPhases turns a run's timings into phases; rest names the time the
// timings do not cover.
func runPhases(t sbx.Timings, total time.Duration, rest string) []Phase {
	var ph []Phase
	if t.UserNSS > 0 {
		ph = append(ph, Phase{PhaseUserNS, t.UserNSS * 1000})
	}
	ph = append(ph, []Phase{
		// RootfsS includes the user namespace's making: counted once.
		{PhaseRootfs, max(t.RootfsS-t.UserNSS, 0) * 1000},
		{PhaseStart, t.StartS * 1000},
		// CommandS counts from the start of the container, like the
		// report's wall time; the command's own share follows the start.
		{PhaseCommand, max(t.CommandS-t.StartS, 0) * 1000},
		{PhaseTeardown, t.TeardownS * 1000},
	}...)
	sum := 0.0
	for _, p := range ph {
		sum += p.Ms
	}
	return append(ph, Phase{rest, max(Ms(total)-sum, 0)})
}
