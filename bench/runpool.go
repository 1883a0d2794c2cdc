package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// runPool is the pooled run subject's warm pool.
const runPool = "bench-run"

// Phases of a pooled run.
const (
	PhaseRunClaim    = "claim a pool member, personalise it"
	PhaseRunCommand  = "command in the member (executor exec)"
	PhaseRunTeardown = "remove the member"
	PhaseRunProcess  = "sbx process: exec, flags, report, exit"
)

// sbxPooledRun is `sbx run` as a fresh process on a root with a warm pool
// whose key the run matches: the run's command runs in a claimed member,
// which is removed afterwards; the pool is refilled between samples
// (untimed). It sits beside the cold run in the cold scenario.
type sbxPooledRun struct {
	w   Workload
	env *hostEnv
	dir string
}

func (s *sbxPooledRun) Name() string { return "sbx run, pooled" }

func (s *sbxPooledRun) Setup(ctx context.Context) (Info, error) {
	info := Info{Version: SbxVersion(), Command: "sbx run --rootfs DIR -- " + strings.Join(s.w.Args, " ") + " on a --root with a warm pool of " + fmt.Sprint(poolSize)}
	if s.w.Image != "" {
		info.Command = "sbx run --pull never " + s.w.Image + " " + strings.Join(s.w.Args, " ") + " on a --root with a warm pool of " + fmt.Sprint(poolSize)
	}
	if err := CheckStatic(s.w.SbxBin); err != nil {
		return info, err
	}
	env, err := newHostEnv(s.w)
	if err != nil {
		return info, err
	}
	s.env = env
	if env.w.Image != "" && env.w.imageStore != nil {
		if err := os.Symlink(env.w.imageStore.Root(), filepath.Join(env.root, "images")); err != nil {
			return info, err
		}
	}
	opts := env.options()
	opts.Pull = ""
	if _, err := env.h.CreatePool(ctx, sbx.PoolSpec{Name: runPool, Size: poolSize, Options: opts}); err != nil {
		return info, fmt.Errorf("define the warm pool: %w", err)
	}
	if _, err := env.h.FillPool(ctx, runPool); err != nil {
		return info, fmt.Errorf("fill the warm pool: %w", err)
	}
	s.dir, err = os.MkdirTemp("", "sbx-bench-pooled-run-")
	return info, err
}

func (s *sbxPooledRun) Once(ctx context.Context) (Sample, error) {
	env := s.env
	reportPath := filepath.Join(s.dir, "report.json")
	args := []string{"--root", env.root, "--run-root", env.runRoot, "run", "--userns", "host", "--report", reportPath}
	if o := env.options(); o.Image != "" {
		args = append(args, "--pull", "never", o.Image)
	} else {
		args = append(args, "--rootfs", o.Rootfs, "--")
	}
	cmd := exec.CommandContext(ctx, s.w.SbxBin, append(args, s.w.Args...)...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	total := time.Since(t0)
	if err != nil {
		return Sample{}, fmt.Errorf("sbx run: %w: %s", err, lastLines(string(out), 3))
	}
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
	if _, err := env.h.FillPool(ctx, runPool); err != nil {
		return Sample{}, fmt.Errorf("refill the pool: %w", err)
	}
	if !strings.HasPrefix(rep.Timings.Pool, "hit") {
		return Sample{}, fmt.Errorf("the run did not claim a pool member: %s", rep.Timings.Pool)
	}
	t := rep.Timings
	known := (t.StartS + t.CommandS + t.TeardownS) * 1000
	return Sample{Value: Ms(total), Phases: []Phase{
		{PhaseRunClaim, t.StartS * 1000}, {PhaseRunCommand, t.CommandS * 1000},
		{PhaseRunTeardown, t.TeardownS * 1000}, {PhaseRunProcess, max(Ms(total)-known, 0)},
	}}, nil
}

func (s *sbxPooledRun) Close() error {
	if s.env == nil {
		return nil
	}
	_, err := s.env.h.RemovePool(context.Background(), runPool)
	return errors.Join(err, s.env.close(), os.RemoveAll(s.dir))
}
