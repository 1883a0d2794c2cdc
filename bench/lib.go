package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// LibScenario measures an in-process one-shot run through
// sandbox.Host.Run (create, start, wait, remove) against the same sandbox
// started with libcontainer alone (the command as PID 1, without sbx's
// init): with libcontainer building the seccomp filter as runc does,
// without seccomp, also without the /sys/fs/cgroup mount, and with only
// /proc and /dev mounted. The differences show what seccomp and the
// mounts cost.
func LibScenario(w Workload) *Scenario {
	return &Scenario{
		Name:        "lib",
		Description: "in-process one-shot run of `" + strings.Join(w.Args, " ") + "` with sandbox.Host.Run: create, start, wait, remove",
		Unit:        "ms",
		Subjects: []Subject{&sbxLib{w: w},
			&plainLibcontainer{w: w, name: "libcontainer", seccomp: true},
			&plainLibcontainer{w: w, name: "libcontainer-noseccomp"},
			&plainLibcontainer{w: w, name: "libcontainer-nocgroupfs", noCgroupfs: true},
			&plainLibcontainer{w: w, name: "libcontainer-minimal", minimal: true}},
		Probes: componentProbes(w),
	}
}

// sbxLib runs sandbox.Host.Run in this process.
type sbxLib struct {
	w   Workload
	env *hostEnv
}

func (s *sbxLib) Name() string { return "sbx" }

func (s *sbxLib) Setup(context.Context) (Info, error) {
	var err error
	s.env, err = newHostEnv(s.w)
	return Info{Version: SbxVersion(), Command: "sandbox.Host.Run(RunOptions{Options: {Image or Rootfs}, Cmd: " + fmt.Sprintf("%q", s.w.Args) + "})"}, err
}

func (s *sbxLib) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	o := sbx.RunOptions{Options: s.env.options(), Stdout: io.Discard, Stderr: io.Discard}
	o.Cmd = s.w.Args
	if o.Image != "" {
		o.Entrypoint = []string{} // the workload's command, whatever the image's
	}
	rep, err := s.env.h.Run(ctx, o)
	total := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if rep.Status != sbx.RunOK {
		return Sample{}, fmt.Errorf("run ended with status %s (exit %d): %s", rep.Status, rep.ExitCode, rep.Error)
	}
	return Sample{Value: Ms(total), Phases: runPhases(rep.Timings, total, "run directory, pipes, report")}, nil
}

func (s *sbxLib) Close() error { return s.env.close() }
