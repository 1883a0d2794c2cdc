package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/sandbox"
)

// LibScenario measures an in-process one-shot run through
// sandbox.Runner (create, start, wait, destroy) against the same sandbox
// started with libcontainer alone (the command as PID 1, without sbx's
// init): with libcontainer building the seccomp filter as runc does,
// without seccomp, also without the /sys/fs/cgroup mount, and with only
// /proc and /dev mounted. The differences show what seccomp and the
// mounts cost.
func LibScenario(w Workload) *Scenario {
	return &Scenario{
		Name:        "lib",
		Description: "in-process one-shot run of `" + strings.Join(w.Args, " ") + "` with sandbox.Runner: create, start, wait, destroy",
		Unit:        "ms",
		Subjects: []Subject{&sbxLib{w: w},
			&plainLibcontainer{w: w, name: "libcontainer", seccomp: true},
			&plainLibcontainer{w: w, name: "libcontainer-noseccomp"},
			&plainLibcontainer{w: w, name: "libcontainer-nocgroupfs", noCgroupfs: true},
			&plainLibcontainer{w: w, name: "libcontainer-minimal", minimal: true}},
		Probes: componentProbes(w),
	}
}

// sbxLib runs sandbox.Runner.Run in this process.
type sbxLib struct {
	w Workload
	r *sandbox.Runner
}

func (s *sbxLib) Name() string { return "sbx" }

func (s *sbxLib) Setup(context.Context) (Info, error) {
	s.r = &sandbox.Runner{RunRoot: s.w.RunRoot}
	if s.w.StateRoot != "" { // the init sbx run uses, on disk
		initBin, err := helperbin.Install(filepath.Join(s.w.StateRoot, "helpers"), helperbin.Init)
		if err != nil {
			return Info{}, err
		}
		s.r.Init = initBin
	}
	return Info{Version: SbxVersion(), Command: "sandbox.Runner.Run(RunSpec{Rootfs: DIR, Args: " + fmt.Sprintf("%q", s.w.Args) + "})"}, nil
}

func (s *sbxLib) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	spec := sandbox.RunSpec{Rootfs: s.w.Rootfs, Args: s.w.Args, Stdout: io.Discard, Stderr: io.Discard}
	if len(s.w.Lowers) > 0 {
		spec.Rootfs, spec.Lowers = "", s.w.Lowers
	}
	rep, err := s.r.Run(ctx, spec)
	total := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if rep.Status != sandbox.StatusOK {
		return Sample{}, fmt.Errorf("run ended with status %s (exit %d): %s", rep.Status, rep.ExitCode, rep.Error)
	}
	return Sample{Value: Ms(total), Phases: runPhases(rep.Timings, total, "run directory, pipes, report")}, nil
}

func (s *sbxLib) Close() error { return nil }
