package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/seccomp"
)

// Probe names.
const (
	ProbeNetns        = "netns: unshare + lo up"
	ProbeCgroup       = "cgroup: create, set limits, remove"
	ProbeCgroupAttach = "cgroup: move a process in"
	ProbeExec         = "sbx binary: fork, exec, Go start-up, exit"
	ProbeLCInit       = "sbx-lcinit: fork, exec, Go start-up, exit"
	ProbeInit         = "sbx-init: fork, exec, start-up, exit"
	ProbeExecutor     = "sbx-executor: fork, exec, Go start-up, exit"
	ProbeSeccomp      = "seccomp: build Docker's filter with libseccomp"
	ProbeExeseal      = "libcontainer: sealed clone of the binary for its init"
	ProbeImage        = "image lookup: resolve the image in the cache"
)

// componentProbes measure the components of a sandbox start in isolation.
func componentProbes(w Workload) []Probe {
	return append(imageProbe(w), []Probe{
		{Name: ProbeNetns, Note: "in libcontainer's start; the kernel frees the namespace later, asynchronously", Once: netnsProbe},
		{Name: ProbeCgroup, Note: "in libcontainer's start and teardown; every v1 hierarchy on hybrid hosts", Once: cgroupProbe(false)},
		{Name: ProbeCgroupAttach, Note: "in libcontainer's start, every hierarchy; each move takes the kernel's cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period unless a move happened within the last one", Once: cgroupProbe(true)},
		{Name: ProbeExec, Note: "once per sbx run: the CLI itself", Once: execProbe(w.SbxBin, "version")},
		{Name: ProbeLCInit, Note: "libcontainer's init stage of every start (see isolate)", Once: helperProbe(helperbin.LCInit)},
		{Name: ProbeInit, Note: "PID 1 of one-shot runs (a static C program)", Once: helperProbe(helperbin.Init)},
		{Name: ProbeExeseal, Note: "libcontainer's guard against binary overwrites, in every start: an overlayfs mount, or a memfd copy of the whole binary", Once: exesealProbe},
		{Name: ProbeSeccomp, Note: "what runc pays in every container's init; sbx loads a cached compiled filter instead", Once: seccompProbe(w)},
	}...)
}

// netnsProbe creates a network namespace with lo up on a thread that then
// exits, as libcontainer's nsexec does for a sandbox.
func netnsProbe(context.Context) (time.Duration, error) {
	type result struct {
		d   time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it exits with this goroutine and
		// takes the new namespace with it.
		runtime.LockOSThread()
		t0 := time.Now()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("unshare network namespace: %w", err)}
			return
		}
		if err := linkUp("lo"); err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{d: time.Since(t0)}
	}()
	r := <-ch
	return r.d, r.err
}

// linkUp sets an interface of the current network namespace up.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// cgroupProbe creates, configures and removes a sandbox's cgroups with the
// manager libcontainer uses, with the configuration of a real sandbox; with
// attach it times only moving a (sleeping) process into them, as
// libcontainer moves a sandbox's init.
func cgroupProbe(attach bool) func(context.Context) (time.Duration, error) {
	var base *cgroups.Cgroup
	var setupErr error
	return func(context.Context) (time.Duration, error) {
		if base == nil && setupErr == nil {
			if setupErr = cgroup.EnsureParent(cgroup.Limits{}); setupErr == nil {
				spec := &isolate.Spec{ID: "probe", Rootfs: "/", Args: []string{"true"}, Seccomp: seccomp.Unconfined}
				cfg, err := isolate.Config(spec)
				if err != nil {
					setupErr = err
				} else {
					base = cfg.Cgroups
				}
			}
		}
		if setupErr != nil {
			return 0, setupErr
		}
		cg := *base
		id := nextID("sbx-bench-probe")
		cg.Path, cg.Name, cg.Parent = cgroup.SandboxPath(id), "", ""
		if attach {
			return cgroupAttach(&cg)
		}
		t0 := time.Now()
		m, err := manager.New(&cg)
		if err != nil {
			return 0, fmt.Errorf("cgroup manager: %w", err)
		}
		if err := m.Apply(-1); err != nil {
			_ = m.Destroy()
			return 0, fmt.Errorf("create cgroup: %w", err)
		}
		if err := m.Set(cg.Resources); err != nil {
			_ = m.Destroy()
			return 0, fmt.Errorf("set cgroup limits: %w", err)
		}
		if err := m.Destroy(); err != nil {
			return 0, fmt.Errorf("remove cgroup: %w", err)
		}
		return time.Since(t0), nil
	}
}

// cgroupAttach creates cg, then times moving a sleeping child process into
// it, then kills the child and removes cg.
func cgroupAttach(cg *cgroups.Cgroup) (time.Duration, error) {
	m, err := manager.New(cg)
	if err != nil {
		return 0, fmt.Errorf("cgroup manager: %w", err)
	}
	if err := m.Apply(-1); err != nil {
		_ = m.Destroy()
		return 0, fmt.Errorf("create cgroup: %w", err)
	}
	defer m.Destroy()
	child := exec.Command("/bin/sleep", "30")
	if err := child.Start(); err != nil {
		return 0, fmt.Errorf("start a process to move: %w", err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	t0 := time.Now()
	if err := m.Apply(child.Process.Pid); err != nil {
		return 0, fmt.Errorf("move a process into the cgroup: %w", err)
	}
	return time.Since(t0), nil
}

// exesealProbe makes and drops the sealed copy of /proc/self/exe that
// libcontainer execs as each container's init.
func exesealProbe(context.Context) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "sbx-bench-exeseal-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	f, err := exeseal.CloneSelfExe(dir)
	if err != nil {
		return 0, fmt.Errorf("clone /proc/self/exe: %w", err)
	}
	f.Close()
	return time.Since(t0), nil
}

// execProbe runs bin with args and times it until it exited: with
// `sbx version`, the cost of starting the sbx binary. Exit status 125 (a
// helper's usage error) counts as a start too.
func execProbe(bin string, args ...string) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(t0)
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 125) {
			return 0, fmt.Errorf("%s: %w: %s", bin, err, lastLines(string(out), 2))
		}
		return d, nil
	}
}

// helperDir holds the helper binaries the probes start, installed once
// from this program's embedded copies.
var helperDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "sbx-bench-helpers-") })

// helperProbe times a start of the embedded helper name (without
// arguments: it starts, finds nothing to do, and exits).
func helperProbe(name string) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		dir, err := helperDir()
		if err != nil {
			return 0, err
		}
		bin, err := helperbin.Install(dir, name)
		if err != nil {
			return 0, err
		}
		return execProbe(bin)(ctx)
	}
}

// RemoveProbeHelpers removes the helper binaries installed for probes.
func RemoveProbeHelpers() {
	if dir, err := helperDir(); err == nil {
		os.RemoveAll(dir)
	}
}

// seccompProbe compiles Docker's default profile, as runc's init does.
func seccompProbe(w Workload) func(context.Context) (time.Duration, error) {
	return func(context.Context) (time.Duration, error) {
		cfg, err := isolate.Config(equivalentSpec(w))
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		if _, err := seccomp.Compile(cfg.Seccomp); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
}

// unmountUnder lazily unmounts every mount below dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var targets []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			targets = append(targets, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(targets)))
	var errs []error
	for _, t := range targets {
		if err := unix.Unmount(t, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}
