package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/isolate/reaper"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
)

// RunSpec describes a one-shot run: one command in a fresh sandbox that is
// torn down when the command exits.
type RunSpec struct {
	// Root filesystem: Lowers (image layers, lowest first) or Rootfs (a
	// directory used as the single read-only lower layer). With neither,
	// the sandbox runs in host mode.
	Lowers   []string
	Rootfs   string
	ReadOnly bool
	// RootReady, if set, is called once the root filesystem is mounted (or
	// mounting it failed): callers holding the image store release it.
	RootReady func()

	Args []string
	Env  []string
	Cwd  string
	// User is who the command runs as: a name, uid, name:group or uid:gid,
	// resolved in the sandbox's own /etc/passwd and /etc/group (in host
	// mode, the host's). Empty means root.
	User     string
	Hostname string

	Seccomp         string // default, unconfined or a JSON profile file
	CapAdd, CapDrop []string
	Limits          cgroup.Limits
	DiskBytes       int64
	Network         netns.AttachOptions // mode none (default), host or bridge
	Mounts          []specs.Mount
	Timeout         time.Duration // wall-clock limit; 0 for none

	Tty    bool
	Stdin  io.Reader // nil: /dev/null
	Stdout io.Writer
	Stderr io.Writer
	// ConsoleSize gives the initial terminal size with Tty; Resize carries
	// later sizes (columns, rows).
	ConsoleSize [2]uint16
	Resize      <-chan [2]uint16
	// Signals are forwarded to the command (e.g. SIGINT, SIGTERM received by
	// the caller). Cancelling the context kills the sandbox instead.
	Signals <-chan os.Signal
}

// Statuses of a Report.
const (
	StatusOK          = "ok"
	StatusNonzeroExit = "nonzero_exit"
	StatusSignaled    = "signaled"
	StatusOOM         = "oom"
	StatusTimeout     = "timeout"
	StatusError       = "error"
)

// Exit codes that sbx gives when the command's own does not apply.
const (
	ExitTimeout    = 124
	ExitSbxFailed  = 125
	ExitCannotExec = reaper.ExitCannotExec
	ExitNotFound   = reaper.ExitNotFound
	ExitOOM        = 137
)

// Report is what a run used and how it ended, in the spirit of isolate's
// meta file.
type Report struct {
	Status          string  `json:"status"`
	ExitCode        int     `json:"exit_code"`
	Signal          int     `json:"signal"`
	WallTimeS       float64 `json:"wall_time_s"`
	CPUTimeS        float64 `json:"cpu_time_s"`
	UserTimeS       float64 `json:"user_time_s"`
	SysTimeS        float64 `json:"sys_time_s"`
	MemoryPeakBytes uint64  `json:"memory_peak_bytes"`
	OOMKilled       bool    `json:"oom_killed"`
	TimedOut        bool    `json:"timed_out"`
	PidsPeak        *uint64 `json:"pids_peak,omitempty"` // absent where the host does not track it
	Error           string  `json:"error,omitempty"`
	// Timings break down where the run's time went.
	Timings Timings `json:"timings"`
}

// Timings are the durations of the steps of a run, in seconds. NetworkS
// is the bridge network's attach (FromPool: its namespace came ready from
// the pool); RootfsS the root file system after it.
type Timings struct {
	NetworkS  float64 `json:"network_s"`
	FromPool  bool    `json:"from_pool"`
	RootfsS   float64 `json:"rootfs_s"`
	StartS    float64 `json:"start_s"`
	CommandS  float64 `json:"command_s"`
	TeardownS float64 `json:"teardown_s"`
}

// Runner runs one-shot sandboxes.
type Runner struct {
	// RunRoot is the runtime state directory, e.g. /run/sbx.
	RunRoot string
	// Init is a static init binary, bind-mounted at isolate.InitPath and
	// run as each sandbox's PID 1 ("INIT reaper [flags] -- CMD"): sbx-init
	// or a full sbx binary (default: the sbx-init embedded in this program,
	// written once under RunRoot/helpers).
	Init string
	// Network attaches bridged sandboxes; needed only for bridge mode.
	Network *netns.Network
}

// runsDir and containersDir are below RunRoot; helpersDir is below the
// root (or RunRoot for a Runner without an Init).
const (
	runsDir       = "runs"
	containersDir = "containers"
	helpersDir    = "helpers"
	ownerFile     = "owner"
)

// NewID returns a fresh random sandbox ID.
func NewID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run runs spec to completion and returns its report. An error means sbx
// itself failed; the command's own failures are in the report.
func (r *Runner) Run(ctx context.Context, spec RunSpec) (*Report, error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("no command given")
	}
	initBin := r.Init
	if initBin == "" {
		var err error
		if initBin, err = helperbin.Install(filepath.Join(r.RunRoot, helpersDir), helperbin.Init); err != nil {
			return nil, err
		}
	}
	id := "run-" + NewID()
	dir := filepath.Join(r.RunRoot, runsDir, id)
	rep := &Report{}
	t0 := time.Now()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create run directory: %w (is %s writable? sbx needs root)", err, r.RunRoot)
	}
	// The owner file lets sbx gc tell a live run from a crashed one.
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(ownerRecord(os.Getpid())), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("record run owner: %w", err)
	}
	var root *rootfs.Root
	var ctr *isolate.Container
	var attached bool
	defer func() {
		t := time.Now()
		var errs []error
		if ctr != nil {
			errs = append(errs, ctr.Destroy())
		}
		if attached {
			errs = append(errs, r.Network.Detach(context.WithoutCancel(ctx), id))
		}
		if root != nil {
			errs = append(errs, root.Release())
		}
		errs = append(errs, os.RemoveAll(dir))
		if err := errors.Join(errs...); err != nil {
			slog.Warn("cleanup after run failed; run sbx gc", "id", id, "err", err)
		}
		rep.Timings.TeardownS = time.Since(t).Seconds()
	}()

	hostname := spec.Hostname
	if hostname == "" {
		hostname = id
	}
	ro := rootfs.Options{
		DiskBytes:  diskDefault(spec.DiskBytes, spec.Limits.MemoryBytes),
		Hostname:   hostname,
		Hosts:      hostsFile(hostname),
		ResolvConf: resolvConf(spec.Network.Mode),
		Dirs:       []string{"/.sbx"},
	}
	network := isolate.NetworkNone
	switch spec.Network.Mode {
	case netns.ModeHost:
		network = isolate.NetworkHost
	case netns.ModeBridge:
		if r.Network == nil {
			return nil, errors.New("bridge networking needs a network (Runner.Network)")
		}
		opts := spec.Network
		opts.Hostname = hostname
		attached = true // recorded on disk by the lease before anything is created
		tn := time.Now()
		att, err := r.Network.Attach(ctx, id, opts)
		if err != nil {
			return nil, err
		}
		rep.Timings.NetworkS, rep.Timings.FromPool = time.Since(tn).Seconds(), att.FromPool
		network, ro.Hosts, ro.ResolvConf = att.NetNSPath, att.Hosts, att.ResolvConf
		t0 = time.Now()
	}
	cwd := spec.Cwd
	var err error
	switch {
	case len(spec.Lowers) > 0:
		root, err = rootfs.Prepare(filepath.Join(dir, "fs"), spec.Lowers, ro)
	case spec.Rootfs != "":
		root, err = rootfs.Prepare(filepath.Join(dir, "fs"), []string{spec.Rootfs}, ro)
	default:
		if cwd == "" {
			cwd = rootfs.HostWorkdir
		}
		root, err = rootfs.PrepareHost(filepath.Join(dir, "fs"), ro)
	}
	if spec.RootReady != nil {
		spec.RootReady()
	}
	if err != nil {
		root = nil
		return nil, err
	}
	rep.Timings.RootfsS = time.Since(t0).Seconds()
	userRoot := root.Path
	if len(spec.Lowers) == 0 && spec.Rootfs == "" {
		userRoot = "/" // host mode: the host's passwd and group
	}
	user, err := imagecache.LookupUser(userRoot, spec.User)
	if err != nil {
		return nil, err
	}

	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	defer statusR.Close()
	// The lifeline's write end stays in this process only: when sbx dies,
	// the sandbox's init sees the pipe close and kills everything.
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return nil, fmt.Errorf("lifeline pipe: %w", err)
	}
	defer lifeW.Close()
	args := append([]string{isolate.InitPath, "reaper", "--status-fd", "3", "--lifeline-fd", "4"}, "--")
	if spec.Tty {
		args[len(args)-1] = "--tty"
		args = append(args, "--")
	}
	args = append(args, spec.Args...)
	mounts := append([]specs.Mount{{
		Source: initBin, Destination: isolate.InitPath, Type: "bind",
		Options: []string{"bind", "ro", "nodev", "nosuid"},
	}}, root.Mounts...)
	mounts = append(mounts, spec.Mounts...)
	is := &isolate.Spec{
		ID:                id,
		Rootfs:            root.Path,
		ReadonlyRootfs:    spec.ReadOnly,
		Args:              args,
		Env:               processEnv(imagecache.EnvWithHome(spec.Env, user.Home), hostname, spec.Tty, uint32(user.UID)),
		Cwd:               cwd,
		UID:               uint32(user.UID),
		GID:               uint32(user.GID),
		AdditionalGIDs:    gids(user.AdditionalGroups),
		Hostname:          hostname,
		CapAdd:            spec.CapAdd,
		CapDrop:           spec.CapDrop,
		Seccomp:           spec.Seccomp,
		Limits:            spec.Limits.WithInitAllowance(),
		Network:           network,
		Mounts:            mounts,
		Tty:               spec.Tty,
		HelperSeccomp:     true,
		ParentDeathSignal: int(unix.SIGKILL),
	}
	stdin := spec.Stdin
	stdio := isolate.IO{Stdin: stdin, Stdout: spec.Stdout, Stderr: spec.Stderr, ExtraFiles: []*os.File{statusW, lifeR},
		ConsoleWidth: spec.ConsoleSize[0], ConsoleHeight: spec.ConsoleSize[1]}
	tStart := time.Now()
	ctr, err = isolate.Start(filepath.Join(r.RunRoot, containersDir), is, stdio)
	statusW.Close()
	lifeR.Close()
	if err != nil {
		ctr = nil
		return nil, err
	}
	rep.Timings.StartS = time.Since(tStart).Seconds()
	// Read the status as it comes: the init must never block on the pipe.
	status := reaper.ReadStatus(statusR)

	var copyWG sync.WaitGroup
	if spec.Tty {
		con := ctr.Console()
		copyWG.Add(1)
		go func() {
			defer copyWG.Done()
			_, _ = io.Copy(spec.Stdout, con)
		}()
		if spec.Stdin != nil {
			go func() { _, _ = io.Copy(con, spec.Stdin) }()
		}
		if spec.Resize != nil {
			go func() {
				for sz := range spec.Resize {
					_ = unix.IoctlSetWinsize(int(con.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz[0], Row: sz[1]})
				}
			}()
		}
	}

	var timedOut sync.Once
	timedOutFlag := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		var timer <-chan time.Time
		if spec.Timeout > 0 {
			t := time.NewTimer(spec.Timeout)
			defer t.Stop()
			timer = t.C
		}
		for {
			select {
			case <-done:
				return
			case <-timer:
				timedOut.Do(func() { timedOutFlag = true })
				_ = ctr.Kill()
				return
			case <-ctx.Done():
				_ = ctr.Kill()
				return
			case sig, ok := <-spec.Signals:
				if !ok {
					spec.Signals = nil
					continue
				}
				_ = ctr.Signal(sig)
			}
		}
	}()

	ws, waitErr := ctr.Wait()
	rep.WallTimeS = time.Since(tStart).Seconds()
	rep.Timings.CommandS = rep.WallTimeS
	if spec.Tty {
		copyWG.Wait()
	}
	// The pipe closes when the init exits; a second is plenty.
	st := status.Status(time.Second)
	usage, uerr := ctr.Usage()
	if uerr != nil {
		slog.Debug("no usage for run", "id", id, "err", uerr)
	}
	rep.CPUTimeS = usage.CPUTime.Seconds()
	rep.UserTimeS = usage.UserTime.Seconds()
	rep.SysTimeS = usage.SysTime.Seconds()
	rep.MemoryPeakBytes = usage.MemoryPeak
	if usage.PidsPeak > 0 {
		p := usage.PidsPeak
		rep.PidsPeak = &p
	}
	timedOut.Do(func() {})
	rep.TimedOut = timedOutFlag

	// The outcome is what the host observes: the init's wait status from
	// the kernel (the init exits with the command's code), the cgroup's OOM
	// kills below, sbx's own timer. The init's status only disambiguates,
	// and only when it agrees with the kernel (reaper.Decide).
	out := reaper.Decide(ws, st)
	switch {
	case waitErr != nil && !rep.TimedOut:
		return rep, fmt.Errorf("wait for sandbox: %w", waitErr)
	case rep.TimedOut:
		rep.Status, rep.ExitCode, rep.Signal = StatusTimeout, ExitTimeout, int(unix.SIGKILL)
	case out.ExecError != "":
		rep.Status, rep.ExitCode, rep.Error = StatusError, out.ExitCode, out.ExecError
	default:
		rep.ExitCode, rep.Signal = out.ExitCode, out.Signal
	}
	if usage.OOMKills > 0 {
		rep.OOMKilled = true
		if rep.Status == "" && (rep.Signal == int(unix.SIGKILL) || rep.ExitCode != 0) {
			rep.Status, rep.ExitCode = StatusOOM, ExitOOM
		}
	}
	if rep.Status == "" {
		switch {
		case rep.Signal != 0:
			rep.Status = StatusSignaled
		case rep.ExitCode != 0:
			rep.Status = StatusNonzeroExit
		default:
			rep.Status = StatusOK
		}
	}
	return rep, nil
}

func gids(groups []int) []uint32 {
	var out []uint32
	for _, g := range groups {
		out = append(out, uint32(g))
	}
	return out
}

// processEnv completes the command's environment as docker does.
func processEnv(env []string, hostname string, tty bool, uid uint32) []string {
	has := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		has[k] = true
	}
	out := append([]string{}, env...)
	add := func(k, v string) {
		if !has[k] {
			out = append(out, k+"="+v)
		}
	}
	add("PATH", isolate.DefaultPath)
	add("HOSTNAME", hostname)
	if uid == 0 {
		add("HOME", "/root")
	} else {
		add("HOME", "/")
	}
	if tty {
		add("TERM", "xterm")
	}
	return out
}

func hostsFile(hostname string) string {
	return "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + hostname + "\n"
}

// resolvConf is the host's resolver configuration; loopback nameservers are
// dropped for sandboxes with their own network namespace, where they would
// point at the sandbox itself.
func resolvConf(mode netns.Mode) string {
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	if mode == netns.ModeHost {
		return string(data)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" && (strings.HasPrefix(f[1], "127.") || f[1] == "::1") {
			continue
		}
		if line != "" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// ownerRecord identifies a process across PID reuse: pid and start time.
func ownerRecord(pid int) string {
	return strconv.Itoa(pid) + " " + processStart(pid)
}

// processStart returns the start time of pid from /proc, or "".
func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
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
	return processStart(pid) == f[1]
}

// GCRuns removes what crashed one-shot runs left behind: containers,
// cgroups, mounts, directories and (with a Network) network leases of runs
// whose sbx process is gone. It returns the IDs it cleaned.
func (r *Runner) GCRuns() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.RunRoot, runsDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var cleaned []string
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(r.RunRoot, runsDir, e.Name())
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		if ownerAlive(string(owner)) {
			continue
		}
		if ctr, err := isolate.Load(filepath.Join(r.RunRoot, containersDir), e.Name()); err == nil {
			// The run's init may still be dying (its lifeline just closed):
			// kill every process and wait until the cgroup is empty, or
			// libcontainer refuses to destroy a running container.
			_ = ctr.Kill()
			if err := killCgroup(context.Background(), e.Name()); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, ctr.Destroy())
		}
		errs = append(errs, rootfs.Cleanup(filepath.Join(dir, "fs")), rootfs.Cleanup(dir))
		if paths, ok := cgroup.Leftovers()[e.Name()]; ok {
			errs = append(errs, cgroup.RemovePaths(paths))
		}
		_ = os.RemoveAll(filepath.Join(r.RunRoot, containersDir, e.Name()))
		if r.Network != nil { // a bridged run's lease, veth and rules
			errs = append(errs, r.Network.Detach(context.Background(), e.Name()))
		}
		cleaned = append(cleaned, e.Name())
	}
	return cleaned, errors.Join(errs...)
}
