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

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/seccomp"
)

// Phases of a libcontainer start, told apart by an in-process
// CreateRuntime hook, which libcontainer runs when its init has joined the
// namespaces and cgroups and mounted everything, before pivot_root.
const (
	PhaseLCSpawn  = "libcontainer: spawn init, namespaces, cgroup, mounts"
	PhaseLCFinish = "libcontainer: pivot_root, masked paths, capabilities, seccomp"
	PhaseLCRun    = "command: exec, exit, wait"
	PhaseLCOther  = "rootfs, destroy"
)

// plainLibcontainer starts the sandbox with libcontainer directly, from
// the configuration isolate builds, with the command as PID 1.
type plainLibcontainer struct {
	name       string
	w          Workload
	seccomp    bool // libcontainer builds Docker's filter in its init
	minimal    bool // only /proc and /dev, no masked or read-only paths
	noCgroupfs bool // without the /sys/fs/cgroup mount
	dir        string
	logLevel   logrus.Level
}

func (p *plainLibcontainer) Name() string { return p.name }

func (p *plainLibcontainer) Setup(context.Context) (Info, error) {
	info := Info{Command: "libcontainer.Create + Run of isolate.Config(spec), the command as PID 1"}
	switch {
	case p.noCgroupfs:
		info.Note = "no seccomp; no /sys/fs/cgroup mount (on v1 and hybrid hosts a tmpfs and one mount per hierarchy)"
	case p.minimal:
		info.Note = "no seccomp; only /proc and /dev mounted, no masked or read-only paths: the floor of a libcontainer start"
	case !p.seccomp:
		info.Note = "no seccomp filter"
	default:
		info.Note = "libcontainer builds Docker's seccomp filter in its init, as runc does"
	}
	// libcontainer warns on stderr, once per start, that it cannot save an
	// in-process hook with the container's state; the timing hook needs
	// no saving.
	p.logLevel = logrus.GetLevel()
	if p.logLevel > logrus.ErrorLevel {
		logrus.SetLevel(logrus.ErrorLevel)
	}
	if err := cgroup.EnsureParent(cgroup.Limits{}); err != nil {
		return info, err
	}
	if err := os.MkdirAll(p.w.RunRoot, 0o700); err != nil {
		return info, err
	}
	var err error
	p.dir, err = os.MkdirTemp(p.w.RunRoot, "bench-lib-")
	return info, err
}

func (p *plainLibcontainer) Once(ctx context.Context) (Sample, error) {
	id := nextID("bench-lib")
	t0 := time.Now()
	lowers := []string{p.w.Rootfs}
	if len(p.w.Lowers) > 0 {
		lowers = p.w.Lowers
	}
	root, err := rootfs.Prepare(filepath.Join(p.dir, id), lowers, rootfs.Options{Hostname: id})
	if err != nil {
		return Sample{}, err
	}
	spec := equivalentSpec(p.w)
	spec.ID, spec.Rootfs, spec.ReadonlyRootfs, spec.Mounts = id, root.Path, false, root.Mounts
	if !p.seccomp {
		spec.Seccomp = seccomp.Unconfined
	}
	cfg, err := isolate.Config(spec)
	if err != nil {
		return Sample{}, errors.Join(err, root.Release())
	}
	if p.minimal {
		var mounts []*configs.Mount
		for _, m := range cfg.Mounts {
			if m.Destination == "/proc" || m.Destination == "/dev" {
				mounts = append(mounts, m)
			}
		}
		cfg.Mounts, cfg.MaskPaths, cfg.ReadonlyPaths = mounts, nil, nil
	}
	if p.noCgroupfs {
		var mounts []*configs.Mount
		for _, m := range cfg.Mounts {
			if m.Destination != cgroup.Root && !strings.HasPrefix(m.Destination, cgroup.Root+"/") {
				mounts = append(mounts, m)
			}
		}
		var ro []string
		for _, p := range cfg.ReadonlyPaths {
			if p != cgroup.Root {
				ro = append(ro, p)
			}
		}
		cfg.Mounts, cfg.ReadonlyPaths = mounts, ro
	}
	var tHook time.Time
	cfg.Hooks = configs.Hooks{configs.CreateRuntime: configs.HookList{
		configs.NewFunctionHook(func(*specs.State) error { tHook = time.Now(); return nil }),
	}}
	tPrep := time.Now()
	lc, err := libcontainer.Create(filepath.Join(p.dir, "containers"), id, cfg)
	if err != nil {
		return Sample{}, errors.Join(fmt.Errorf("create container: %w", err), root.Release())
	}
	proc := &libcontainer.Process{Args: spec.Args, Env: spec.Env, Cwd: "/", Stdout: io.Discard, Stderr: io.Discard, Init: true}
	tRun := time.Now()
	if err := lc.Run(proc); err != nil {
		return Sample{}, errors.Join(fmt.Errorf("start container: %w", err), lc.Destroy(), root.Release())
	}
	tStarted := time.Now()
	ps, werr := proc.Wait()
	tExited := time.Now()
	err = errors.Join(werr, lc.Destroy(), root.Release())
	tEnd := time.Now()
	total := tEnd.Sub(t0)
	if err != nil && ps == nil {
		return Sample{}, err
	}
	if ps != nil && !ps.Success() {
		return Sample{}, fmt.Errorf("command failed: %s", ps)
	}
	if tHook.IsZero() {
		return Sample{}, errors.New("libcontainer did not run the CreateRuntime hook")
	}
	ph := []Phase{
		{PhaseLCSpawn, Ms(tHook.Sub(tRun))},
		{PhaseLCFinish, Ms(tStarted.Sub(tHook))},
		{PhaseLCRun, Ms(tExited.Sub(tStarted))},
		{PhaseLCOther, Ms(tPrep.Sub(t0) + tRun.Sub(tPrep) + tEnd.Sub(tExited))},
	}
	return Sample{Value: Ms(total), Phases: ph}, nil
}

func (p *plainLibcontainer) Close() error {
	logrus.SetLevel(p.logLevel)
	if p.dir == "" {
		return nil
	}
	return errors.Join(unmountUnder(p.dir), os.RemoveAll(p.dir))
}
