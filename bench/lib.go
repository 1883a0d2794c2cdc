package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/sandbox"
)

// LibScenario measures an in-process one-shot run through
// sandbox.Runner (create, start, wait, destroy) against the same sandbox
// started with libcontainer alone: libcontainer's own seccomp set-up and
// the command as PID 1, without sbx's init.
func LibScenario(w Workload) *Scenario {
	return &Scenario{
		Name:        "lib",
		Description: "in-process one-shot run of `" + strings.Join(w.Args, " ") + "` with sandbox.Runner: create, start, wait, destroy",
		Unit:        "ms",
		Subjects:    []Subject{&sbxLib{w: w}, &plainLibcontainer{w: w}},
		Probes:      componentProbes(w),
	}
}

// sbxLib runs sandbox.Runner.Run in this process.
type sbxLib struct {
	w Workload
	r *sandbox.Runner
}

func (s *sbxLib) Name() string { return "sbx" }

func (s *sbxLib) Setup(context.Context) (Info, error) {
	s.r = &sandbox.Runner{RunRoot: s.w.RunRoot, Helper: s.w.SbxBin}
	return Info{Command: "sandbox.Runner.Run(RunSpec{Rootfs: DIR, Args: " + fmt.Sprintf("%q", s.w.Args) + "})"}, nil
}

func (s *sbxLib) Once(ctx context.Context) (Sample, error) {
	t0 := time.Now()
	rep, err := s.r.Run(ctx, sandbox.RunSpec{Rootfs: s.w.Rootfs, Args: s.w.Args, Stdout: io.Discard, Stderr: io.Discard})
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

// plainLibcontainer starts the same sandbox (overlay root, namespaces,
// capabilities, masked paths, Docker's seccomp profile) with libcontainer
// directly: the filter is built by libcontainer's init and the command is
// PID 1, as in runc, minus runc's CLI process.
type plainLibcontainer struct {
	w   Workload
	dir string
}

func (p *plainLibcontainer) Name() string { return "libcontainer" }

func (p *plainLibcontainer) Setup(context.Context) (Info, error) {
	info := Info{Command: "isolate.Start without sbx's init: libcontainer builds the seccomp filter, the command is PID 1"}
	var err error
	p.dir, err = os.MkdirTemp(p.w.RunRoot, "bench-lib-")
	if err != nil {
		if err := os.MkdirAll(p.w.RunRoot, 0o700); err != nil {
			return info, err
		}
		p.dir, err = os.MkdirTemp(p.w.RunRoot, "bench-lib-")
	}
	return info, err
}

func (p *plainLibcontainer) Once(ctx context.Context) (Sample, error) {
	id := nextID("bench-lib")
	t0 := time.Now()
	root, err := rootfs.Prepare(filepath.Join(p.dir, id), []string{p.w.Rootfs}, rootfs.Options{Hostname: id})
	if err != nil {
		return Sample{}, err
	}
	spec := equivalentSpec(p.w)
	spec.ID, spec.Rootfs, spec.ReadonlyRootfs, spec.Mounts = id, root.Path, false, root.Mounts
	ctr, err := isolate.Start(filepath.Join(p.dir, "containers"), spec, isolate.IO{Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		return Sample{}, errors.Join(err, root.Release())
	}
	ws, werr := ctr.Wait()
	err = errors.Join(werr, ctr.Destroy(), root.Release())
	total := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if ws.ExitStatus() != 0 {
		return Sample{}, fmt.Errorf("command exited %d", ws.ExitStatus())
	}
	return Sample{Value: Ms(total)}, nil
}

func (p *plainLibcontainer) Close() error {
	if p.dir == "" {
		return nil
	}
	return errors.Join(unmountUnder(p.dir), os.RemoveAll(p.dir))
}
