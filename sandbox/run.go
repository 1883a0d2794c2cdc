package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/isolate/initstatus"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/sandbox/state"
)

// A one-shot run is a sandbox's create, start, wait and remove over the
// pipeline of Create (resolveRoot, provision, containerSpec), with one
// fast path kept: PID 1 is sbx's small init running the command, not the
// executor, and no record is written. Its runtime directory under
// RunRoot/runs, with an owner file naming the sbx process, is its record:
// GC cleans up after runs whose process died.

// runsDir and ownerFile are below RunRoot.
const (
	runsDir   = "runs"
	ownerFile = "owner"
)

// Run runs o.Cmd in a fresh sandbox and removes it. An error means sbx
// itself failed; the command's own failures are in the report.
func (h *Host) Run(ctx context.Context, o sbx.RunOptions) (*sbx.Report, error) {
	return h.run(ctx, o, h.cfg.Policy)
}

func (h *Host) run(ctx context.Context, o sbx.RunOptions, policy *sbx.Policy) (*sbx.Report, error) {
	if len(o.Secrets) > 0 {
		return nil, fmt.Errorf("%w: secrets need a long-lived sandbox (sbx create), not a one-shot run", sbx.ErrUnsupported)
	}
	prep, miss, err := h.runPooled(ctx, &o, policy)
	if prep != nil || err != nil {
		return prep, err
	}
	r, err := h.createRun(ctx, &o, policy)
	if err != nil {
		return nil, err
	}
	rep := &sbx.Report{}
	if miss != "" {
		rep.Timings.Pool = "miss, " + miss
	}
	defer func() { rep.Timings.TeardownS = r.remove(ctx) }()
	rep.Timings.NetworkS, rep.Timings.FromPool, rep.Timings.RootfsS = r.p.networkS, r.p.fromPool, r.p.rootfsS
	rep.Timings.UserNSS = r.p.usernsS
	if err := r.start(&o); err != nil {
		return nil, err
	}
	rep.Timings.StartS = r.startS
	return rep, r.wait(ctx, &o, rep)
}

// run is one one-shot sandbox.
type run struct {
	h       *Host
	id, dir string
	p       *provisioned
	proc    sbx.Process
	user    rootfs.User
	ctr     *isolate.Container
	view    string   // the cgroup view mounted for the container, if any
	dev     string   // the /dev mounted for the container, if any
	status  *os.File // the init's report of how the command ended
	reader  *initstatus.StatusReader
	life    *os.File // lifeline: the init kills everything when it closes
	stdio   *runStdio
	t0      time.Time
	startS  float64
	created bool
}

// createRun resolves the run's root and process and provisions its
// network and root. On error nothing is left behind.
func (h *Host) createRun(ctx context.Context, o *sbx.RunOptions, policy *sbx.Policy) (_ *run, err error) {
	if len(o.Cmd) == 0 && o.Image == "" {
		return nil, fmt.Errorf("%w: no command given", sbx.ErrInvalid)
	}
	if o.Name != "" || o.TTL != 0 || o.IdleTimeout != 0 || o.Lease != 0 || len(o.Labels) > 0 {
		return nil, fmt.Errorf("%w: name, ttl, idle_timeout, lease and labels are for long-lived sandboxes (Create), not runs", sbx.ErrInvalid)
	}
	if err := h.checkOptions(&o.Options, false, policy); err != nil {
		return nil, err
	}
	root, release, err := h.resolveRoot(ctx, &o.Options, o.PullProgress)
	if err != nil {
		return nil, err
	}
	if err := checkWorkdir(&o.Options, root.lowers); err != nil {
		release()
		return nil, err
	}
	// The image store is held from resolving the image until the run's
	// layers are recorded (runsDir/ID/layers.json, read by image GC while
	// the run's process lives), so that a concurrent image GC cannot
	// remove them in between; mounts do not name their layers.
	defer release()
	// Runs are named run-<12 hex digits>: apart from sandboxes (in
	// container state, cgroups and leases), short for hostnames.
	r := &run{h: h, id: "run-" + state.NewID()[:state.ShortIDLength], t0: time.Now()}
	r.dir = filepath.Join(h.store.RunRoot(), runsDir, r.id)
	if err := r.processOf(o, root); err != nil {
		return nil, err
	}
	var made []string // the volumes made for the run
	defer func() {
		if err != nil {
			r.remove(ctx)
			h.dropMadeVolumes(context.WithoutCancel(ctx), made)
		}
	}()
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create run directory: %w (is %s writable? sbx needs root)", err, h.store.RunRoot())
	}
	r.created = true
	isolate.WarmCgroups(r.id) // removed with the run's cgroups (runPlan)
	if err := mountRunDir(r.dir); err != nil {
		return nil, err
	}
	// The owner file lets GC tell a live run from a crashed one.
	if err := os.WriteFile(filepath.Join(r.dir, ownerFile), []byte(ownerRecord(os.Getpid())), 0o600); err != nil {
		return nil, fmt.Errorf("record run owner: %w", err)
	}
	// Its named volumes, which sbx volume rm and prune leave alone while
	// it runs (volumeUsers).
	if err := writeRunVolumes(r.dir, o.Volumes); err != nil {
		return nil, err
	}
	// A run's command may have written into them when it is killed: gc
	// leaves them (no made-for).
	if made, err = h.keepVolumes(ctx, "", &o.Options); err != nil {
		return nil, err
	}
	if o.Image != "" {
		if err := writeRunLayers(r.dir, root.lowers); err != nil {
			return nil, err
		}
	}
	host := o.Hostname
	if host == "" {
		host = r.id
	}
	r.p = &provisioned{id: r.id, hostname: host, opts: &o.Options, lowers: root.lowers, dir: filepath.Join(r.dir, "fs")}
	if o.UserNS == sbx.UserNSPrivate {
		r.p.usernsOwner = runOwner(h.store.RunRoot(), r.id)
	}
	if err := h.provision(ctx, r.p, func(string) {}); err != nil {
		return nil, err
	}
	userRoot := r.p.root.Path
	if len(root.lowers) == 0 {
		userRoot = "/" // host mode: the host's passwd and group
	}
	if r.user, err = rootfs.LookupUser(userRoot, r.proc.User); err != nil {
		return nil, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	return r, nil
}

// runDirBytes caps the tmpfs of a run's directory: it holds the owner and
// the run's records (a few KiB) and the mount points of its root, cgroup
// view and /dev, whose contents are mounts of their own.
const runDirBytes = 1 << 20

// mountRunDir mounts a small tmpfs on the run's directory dir. Every run
// makes and removes some twenty directories and files there (its root's,
// cgroup view's and /dev's mount points, its records); on a tmpfs that
// costs a fraction of what it costs where the run root is on a disk's
// filesystem (ext4: about 150 µs for one directory made and removed,
// against 12 µs). Removing the run (rootfs.Cleanup, also gc's) unmounts
// it with everything below; after a reboot the directory is empty, which
// gc takes for a crashed run.
func mountRunDir(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size="+strconv.Itoa(runDirBytes)); err != nil {
		return fmt.Errorf("mount the run directory's tmpfs on %s: %w", dir, err)
	}
	// Private, so that neither it nor the run's mounts below it propagate
	// to other mount namespaces where the run root is on a shared mount
	// (systemd makes / shared).
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("make the run directory's tmpfs on %s private: %w", dir, err)
	}
	return nil
}

// unmountRunDir detaches the tmpfs of the run's directory dir with every
// mount below it (the root and its writable layer, the cgroup view, /dev)
// in one call, lazily as the releases of the run's plan do: each unmount
// call waits in the kernel (0.2 ms p50 on this machine, 12 ms p90), once
// here instead of once per mount. The releases then find nothing mounted
// below dir. A dir that is not a mount (its tmpfs never made) is left to
// them.
func unmountRunDir(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the run directory %s: %w", dir, err)
	}
	return nil
}

// processOf decides the command, environment and working directory: the
// image's Entrypoint + Cmd with the options over them, as docker runs an
// image, or the options alone.
func (r *run) processOf(o *sbx.RunOptions, root resolvedRoot) error {
	if root.config != nil {
		p, err := root.config.Process(o.Entrypoint, o.Cmd, o.Env, o.Workdir, o.User)
		if err != nil {
			return fmt.Errorf("%w: image %s: %w", sbx.ErrInvalid, o.Image, err)
		}
		r.proc = p
		return nil
	}
	args := o.Cmd
	if o.Entrypoint != nil {
		args = append(append([]string{}, o.Entrypoint...), o.Cmd...)
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: no command given", sbx.ErrInvalid)
	}
	r.proc = sbx.Process{Args: args, Env: o.Env, Cwd: o.Workdir, User: o.User}
	if r.proc.Cwd == "" && len(root.lowers) == 0 {
		r.proc.Cwd = rootfs.HostWorkdir
	}
	return nil
}

// start starts the container with sbx's init as PID 1 running the
// command, and connects the caller's input and output.
func (r *run) start(o *sbx.RunOptions) error {
	h := r.h
	source, err := h.initBinary()
	if err != nil {
		return err
	}
	initPath := isolate.InitPath
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("status pipe: %w", err)
	}
	r.status = statusR
	defer statusW.Close()
	// The lifeline's write end stays in this process only: when sbx dies,
	// the sandbox's init sees the pipe close and kills everything.
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lifeline pipe: %w", err)
	}
	r.life = lifeW
	defer lifeR.Close()
	args := []string{initPath, "reaper", "--status-fd", "3", "--lifeline-fd", "4", "--"}
	if o.Tty {
		args[len(args)-1] = "--tty"
		args = append(args, "--")
	}
	args = append(args, r.proc.Args...)
	env := processEnv(r.proc.Env, r.p.hostname, o.Tty, r.user.Home)
	spec := containerSpec(r.p, args, env, r.proc.Cwd, r.user, []specs.Mount{readOnlyBind(source, initPath)})
	spec.Tty = o.Tty
	spec.ParentDeathSignal = int(unix.SIGKILL)
	if spec.CgroupView, err = r.mountCgroupView(); err != nil {
		return err
	}
	if spec.Dev, err = r.mountDev(); err != nil {
		return err
	}
	owner := -1
	if r.p.uns != nil {
		owner = int(r.p.uns.rng.HostID)
	}
	if r.stdio, err = newRunStdio(o, owner); err != nil {
		return fmt.Errorf("pipes for the command's input and output: %w", err)
	}
	stdio := isolate.IO{Stdin: r.stdio.in, Stdout: r.stdio.out, Stderr: r.stdio.err, ExtraFiles: []*os.File{statusW, lifeR},
		ConsoleWidth: o.ConsoleSize[0], ConsoleHeight: o.ConsoleSize[1]}
	t := time.Now()
	if r.ctr, err = isolate.Start(h.containerRoot(), spec, stdio); err != nil {
		r.ctr = nil
		r.stdio.abort()
		return err
	}
	r.stdio.started()
	r.startS = time.Since(t).Seconds()
	r.t0 = t
	// Read the status as it comes: the init must never block on the pipe.
	r.reader = initstatus.ReadStatus(r.status)
	return nil
}

// mountCgroupView mounts the run's cgroup view in its directory (on the
// host: a run has no mount namespace of its own), returning it for
// Spec.CgroupView, or "" where the view is one bind anyway (pure v2). gc
// unmounts a crashed run's view with its directory (rootfs.Cleanup).
func (r *run) mountCgroupView() (string, error) {
	dir := filepath.Join(r.dir, cgroupViewDir)
	made, err := isolate.MountCgroupView(dir, r.id)
	if made || err != nil {
		r.view = dir // remove undoes it, and the cgroups it made
	}
	if !made {
		return "", err
	}
	return dir, nil
}

// mountDev mounts the run's /dev in its directory (on the host, as the
// cgroup view), returning it for Spec.Dev. gc unmounts a crashed run's
// with its directory.
func (r *run) mountDev() (string, error) {
	dir := filepath.Join(r.dir, devDir)
	owner := -1
	if r.p.uns != nil {
		owner = int(r.p.uns.rng.HostID)
	}
	r.dev = dir // remove undoes it
	if err := isolate.MountDev(dir, owner); err != nil {
		return "", err
	}
	return dir, nil
}

// wait waits for the command (killing the sandbox at the timeout or when
// ctx ends, passing on o.Signals) and fills in the report.
func (r *run) wait(ctx context.Context, o *sbx.RunOptions, rep *sbx.Report) error {
	ctr := r.ctr
	var copies sync.WaitGroup
	if o.Tty {
		con := ctr.Console()
		copies.Add(1)
		go func() {
			defer copies.Done()
			_, _ = io.Copy(writerOr(o.Stdout), con)
		}()
		if o.Stdin != nil {
			go func() { _, _ = io.Copy(con, o.Stdin) }()
		}
		if o.Resize != nil {
			go func() {
				for sz := range o.Resize {
					_ = unix.IoctlSetWinsize(int(con.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz[0], Row: sz[1]})
				}
			}()
		}
	}
	var mu sync.Mutex
	timedOut := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		var timer <-chan time.Time
		if o.Timeout > 0 {
			t := time.NewTimer(o.Timeout)
			defer t.Stop()
			timer = t.C
		}
		signals := o.Signals
		for {
			select {
			case <-done:
				return
			case <-timer:
				mu.Lock()
				timedOut = true
				mu.Unlock()
				_ = ctr.Kill()
				return
			case <-ctx.Done():
				_ = ctr.Kill()
				return
			case sig, ok := <-signals:
				if !ok {
					signals = nil
					continue
				}
				_ = ctr.Signal(sig)
			}
		}
	}()

	ws, waitErr := ctr.Wait()
	rep.WallTimeS = time.Since(r.t0).Seconds()
	rep.Timings.CommandS = rep.WallTimeS
	if o.Tty {
		copies.Wait()
	}
	r.stdio.finish()
	// The pipe closes when the init exits; a second is plenty.
	st := r.reader.Status(time.Second)
	usage, uerr := ctr.Usage()
	if uerr != nil {
		r.h.log.Debug("no usage for run", "id", r.id, "err", uerr)
	}
	rep.CPUTimeS = usage.CPUTime.Seconds()
	rep.UserTimeS = usage.UserTime.Seconds()
	rep.SysTimeS = usage.SysTime.Seconds()
	rep.MemoryPeakBytes = usage.MemoryPeak
	if usage.PidsPeak > 0 {
		p := usage.PidsPeak
		rep.PidsPeak = &p
	}
	mu.Lock()
	rep.TimedOut = timedOut
	mu.Unlock()
	// The outcome is what the host observes: the init's wait status from
	// the kernel (the init exits with the command's code), the cgroup's OOM
	// kills below, sbx's own timer. The init's status only disambiguates,
	// and only when it agrees with the kernel (initstatus.Decide).
	out := initstatus.Decide(ws, st)
	signal := 0
	switch {
	case waitErr != nil && !rep.TimedOut:
		return fmt.Errorf("wait for sandbox: %w", waitErr)
	case rep.TimedOut:
		rep.Status, rep.ExitCode, signal = sbx.RunTimeout, sbx.ExitTimeout, int(unix.SIGKILL)
	case out.ExecError != "":
		rep.Status, rep.ExitCode, rep.Error = sbx.RunError, out.ExitCode, out.ExecError
	default:
		rep.ExitCode, signal = out.ExitCode, out.Signal
	}
	if usage.OOMKills > 0 {
		rep.OOMKilled = true
		if rep.Status == "" && (signal == int(unix.SIGKILL) || rep.ExitCode != 0) {
			rep.Status, rep.ExitCode = sbx.RunOOM, sbx.ExitOOM
		}
	}
	if signal != 0 {
		rep.Signal = unix.SignalName(unix.Signal(signal))
	}
	settleStatus(rep)
	return nil
}

// settleStatus gives a report without a status the one its signal and
// exit code say.
func settleStatus(rep *sbx.Report) {
	if rep.Status != "" {
		return
	}
	switch {
	case rep.Signal != "":
		rep.Status = sbx.RunSignaled
	case rep.ExitCode != 0:
		rep.Status = sbx.RunNonzeroExit
	default:
		rep.Status = sbx.RunOK
	}
}

// runPlan lists the host resources of one-shot run id, as plan does for a
// sandbox, for the one teardown of both (Host.release): its directory
// (owner file, image layers, cgroup view), its user namespace's id range
// and its network attachment when it has them, its root and its
// container. Releasing one never made is a no-op.
func (h *Host) runPlan(id string, bridged, userns bool) []sbx.Resource {
	dir := filepath.Join(h.store.RunRoot(), runsDir, id)
	plan := []sbx.Resource{{Kind: sbx.ResourceRunDir, Path: dir}}
	if userns {
		plan = append(plan, sbx.Resource{Kind: sbx.ResourceUserNS, Path: runOwner(h.store.RunRoot(), id)})
	}
	if bridged {
		plan = append(plan, sbx.Resource{Kind: sbx.ResourceNetwork, ID: id})
	}
	return append(plan,
		sbx.Resource{Kind: sbx.ResourceRootfs, Path: filepath.Join(dir, "fs")},
		sbx.Resource{Kind: sbx.ResourceContainer, Path: h.containerRoot(), ID: id},
	)
}

// remove tears the run down: it releases the run's plan (runPlan) newest
// first, as Host.release does, and returns how long that took. The
// container is the one exception: this process holds it, so it is
// destroyed through that handle, while the root and the network are
// released: they are independent once PID 1 has exited, and in a run
// whose start failed, Destroy's kill ends what is left while the root's
// mounts are detached (lazily: nothing in use is pulled away). The user
// namespace's id range and the directory are released only after
// Destroy.
func (r *run) remove(ctx context.Context) float64 {
	t := time.Now()
	ctx = context.WithoutCancel(ctx)
	var destroyErr error
	destroyed := make(chan struct{})
	go func() {
		defer close(destroyed)
		if r.ctr != nil {
			destroyErr = r.ctr.Destroy()
		}
	}()
	for _, f := range []*os.File{r.status, r.life} {
		if f != nil {
			f.Close()
		}
	}
	waited := false
	waitDestroyed := func() error {
		if waited {
			return nil
		}
		waited = true
		<-destroyed
		return destroyErr
	}
	bridged := r.p != nil && r.p.bridged
	userns := r.p != nil && r.p.usernsOwner != ""
	plan := r.h.runPlan(r.id, bridged, userns)
	var errs []error
	if r.created {
		errs = append(errs, unmountRunDir(r.dir))
	}
	for i := len(plan) - 1; i >= 0; i-- {
		res := plan[i]
		switch res.Kind {
		case sbx.ResourceContainer:
			continue // destroyed above
		case sbx.ResourceUserNS:
			// Every process of the run is gone once Destroy returns: only
			// then may its user id range go to another sandbox.
			errs = append(errs, waitDestroyed())
			r.p.closeUserNS()
		case sbx.ResourceRunDir:
			errs = append(errs, waitDestroyed())
			if r.dev != "" {
				errs = append(errs, isolate.UnmountDev(r.dev))
			}
			if r.view != "" {
				errs = append(errs, isolate.UnmountCgroupView(r.view))
			}
			if r.ctr == nil && r.created { // WarmCgroups or the view made cgroups; no container removed them
				errs = append(errs, cgroup.RemovePaths(cgroup.SandboxLeftovers(r.id)))
			}
			if !r.created {
				continue
			}
		}
		errs = append(errs, r.h.releaseResource(ctx, res))
	}
	if err := errors.Join(errs...); err != nil {
		r.h.log.Warn("cleanup after run failed; run sbx gc", "id", r.id, "err", err)
	}
	return time.Since(t).Seconds()
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ownerRecord identifies a process across PID reuse: pid and start time.
func ownerRecord(pid int) string {
	start, _ := procStart(pid)
	return strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10)
}

// runOwnerGrace is how long a run's directory may be without its owner
// record before gc takes it for a crashed run's: between the directory's
// mkdir, the mount of its tmpfs and the record's write, a run being
// created has none.
const runOwnerGrace = 10 * time.Second

// beingCreated reports whether the run directory dir, which has no owner
// record, was made (or its tmpfs mounted) within runOwnerGrace.
func beingCreated(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && time.Since(fi.ModTime()) < runOwnerGrace
}

// ownerAlive reports whether the process recorded in an owner file runs.
func ownerAlive(record string) bool {
	f := strings.Fields(record)
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return false
	}
	start, ok := procStart(pid)
	return ok && strconv.FormatUint(start, 10) == f[1]
}

// runLayersFile in a run's directory lists the image layers it mounts;
// runVolumesFile the named volumes it mounts.
const (
	runLayersFile  = "layers.json"
	runVolumesFile = "volumes.json"
)

func writeRunLayers(dir string, layers []string) error {
	data, _ := json.Marshal(layers)
	if err := os.WriteFile(filepath.Join(dir, runLayersFile), data, 0o600); err != nil {
		return fmt.Errorf("record the run's image layers: %w", err)
	}
	return nil
}

// liveRunLayers returns the image layers of the one-shot runs under
// runRoot whose sbx process still runs.
func liveRunLayers(runRoot string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(runRoot, runsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(runRoot, runsDir, e.Name())
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		if !ownerAlive(string(owner)) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, runLayersFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var layers []string
		if err != nil || json.Unmarshal(data, &layers) != nil {
			return nil, fmt.Errorf("read the image layers of run %s: %v", e.Name(), err)
		}
		out = append(out, layers...)
	}
	return out, nil
}

// writeRunVolumes records, in the run directory dir, the names of the
// named volumes among vols (nothing when there are none).
func writeRunVolumes(dir string, vols []sbx.Volume) error {
	var names []string
	for _, v := range vols {
		if v.Name != "" && !slices.Contains(names, v.Name) {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	data, err := json.Marshal(names)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, runVolumesFile), data, 0o600); err != nil {
		return fmt.Errorf("record the run's named volumes: %w", err)
	}
	return nil
}

// liveRunVolumes maps each named volume of the one-shot runs under
// runRoot whose sbx process still runs to those runs' ids.
func liveRunVolumes(runRoot string) (map[string][]string, error) {
	entries, err := os.ReadDir(filepath.Join(runRoot, runsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := map[string][]string{}
	for _, e := range entries {
		dir := filepath.Join(runRoot, runsDir, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, runVolumesFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		if !ownerAlive(string(owner)) {
			continue
		}
		var names []string
		if err != nil || json.Unmarshal(data, &names) != nil {
			return nil, fmt.Errorf("read the named volumes of run %s: %v", e.Name(), err)
		}
		for _, n := range names {
			out[n] = append(out[n], e.Name())
		}
	}
	return out, nil
}

// gcRuns removes what crashed one-shot runs left behind: it releases the
// plan (runPlan: container, cgroups, mounts, user namespace, network
// lease, directory) of every run whose sbx process is gone. It returns the
// ids it cleaned.
func (h *Host) gcRuns(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(h.store.RunRoot(), runsDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var cleaned []string
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(h.store.RunRoot(), runsDir, e.Name())
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		if ownerAlive(string(owner)) || len(owner) == 0 && beingCreated(dir) {
			continue
		}
		// Whatever the run had: a network attachment if this root has a
		// network, a user namespace's id range.
		errs = append(errs, h.release(ctx, h.runPlan(e.Name(), h.networkExists(), true)))
		cleaned = append(cleaned, e.Name())
	}
	return cleaned, errors.Join(errs...)
}
