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
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/seccomp"
)

// Probe names.
const (
	ProbeNetns   = "netns: unshare + lo up"
	ProbeCgroup  = "cgroup: create, set limits, remove"
	ProbeExec    = "sbx binary: fork, exec, Go start-up, exit"
	ProbeSeccomp = "seccomp: build Docker's filter with libseccomp"
	ProbeExeseal = "libcontainer: sealed clone of the binary for its init"
	ProbeImage   = "image lookup: resolve the image in the cache"
)

// componentProbes measure the components of a sandbox start in isolation.
func componentProbes(w Workload) []Probe {
	return append(imageProbe(w), []Probe{
		{Name: ProbeNetns, Note: "in libcontainer's start; the kernel frees the namespace later, asynchronously", Once: netnsProbe},
		{Name: ProbeCgroup, Note: "in libcontainer's start and teardown; every v1 hierarchy on hybrid hosts", Once: cgroupProbe()},
		{Name: ProbeExec, Note: "paid per re-exec: sbx run, libcontainer's init, the sandbox's init", Once: execProbe(w.SbxBin)},
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
// manager libcontainer uses, with the configuration of a real sandbox.
func cgroupProbe() func(context.Context) (time.Duration, error) {
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

// execProbe runs `sbx version`: the cost of starting the sbx binary.
func execProbe(bin string) func(context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, bin, "version")
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("sbx version: %w: %s", err, lastLines(string(out), 2))
		}
		return time.Since(t0), nil
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
