package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups/devices/config"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	// Device rules need the cgroup device manager registered.
	_ "github.com/opencontainers/cgroups/devices"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/childexit"
	"github.com/sbxrun/sbx/seccomp"
)

// IO connects a sandbox's PID 1 to the caller. With a Spec.Tty the standard
// streams are ignored and the terminal's master is returned by Console.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ExtraFiles are passed to PID 1 as fd 3, 4, ...
	ExtraFiles    []*os.File
	ConsoleWidth  uint16
	ConsoleHeight uint16
}

// Container is a running (or stopped) sandbox process tree.
type Container struct {
	lc      *libcontainer.Container
	proc    *libcontainer.Process
	console *os.File
}

// allowedDevices is the device cgroup allow-list: Docker's, without the
// blanket mknod permission, so only these nodes can ever be created or used.
var allowedDevices = []*config.Rule{
	{Type: config.CharDevice, Major: 1, Minor: 3, Permissions: "rwm", Allow: true},                 // null
	{Type: config.CharDevice, Major: 1, Minor: 5, Permissions: "rwm", Allow: true},                 // zero
	{Type: config.CharDevice, Major: 1, Minor: 7, Permissions: "rwm", Allow: true},                 // full
	{Type: config.CharDevice, Major: 1, Minor: 8, Permissions: "rwm", Allow: true},                 // random
	{Type: config.CharDevice, Major: 1, Minor: 9, Permissions: "rwm", Allow: true},                 // urandom
	{Type: config.CharDevice, Major: 5, Minor: 0, Permissions: "rwm", Allow: true},                 // tty
	{Type: config.CharDevice, Major: 5, Minor: 1, Permissions: "rwm", Allow: true},                 // console
	{Type: config.CharDevice, Major: 5, Minor: 2, Permissions: "rwm", Allow: true},                 // ptmx
	{Type: config.CharDevice, Major: 136, Minor: config.Wildcard, Permissions: "rwm", Allow: true}, // pts
}

// OCISpec returns the OCI runtime spec equivalent to s, with its seccomp
// profile resolved, e.g. to run the same sandbox with another runtime.
func OCISpec(s *Spec) (*specs.Spec, error) {
	return ociSpec(s, true)
}

func ociSpec(s *Spec, portable bool) (*specs.Spec, error) {
	oci, err := s.oci(portable)
	if err != nil {
		return nil, err
	}
	if oci.Linux.Seccomp == nil && s.Seccomp != seccomp.Unconfined {
		if oci.Linux.Seccomp, err = seccomp.Resolve(s.Seccomp, oci); err != nil {
			return nil, err
		}
	}
	return oci, nil
}

// Config builds the libcontainer configuration for a spec.
func Config(s *Spec) (*configs.Config, error) {
	cfg, _, err := build(s, "")
	return cfg, err
}

// build makes the libcontainer configuration and, with HelperSeccomp, the
// compiled filter (cached in cacheDir) that the helper will load.
func build(s *Spec, cacheDir string) (*configs.Config, []byte, error) {
	key, memo := filterKey(s)
	if memo && cacheDir != "" {
		if prog := filters.get(key); prog != nil {
			if err := checkHelperArgs(s); err != nil {
				return nil, nil, err
			}
			// The filter this process compiled for the same profile and
			// capabilities: the profile is neither built nor converted
			// again (about half a millisecond of every start).
			cfg, err := libcontainerConfig(s, false)
			return cfg, prog, err
		}
	}
	cfg, err := libcontainerConfig(s, true)
	if err != nil || !s.HelperSeccomp || cfg.Seccomp == nil {
		return cfg, nil, err
	}
	if err := checkHelperArgs(s); err != nil {
		return nil, nil, err
	}
	var prog []byte
	if cacheDir == "" {
		prog, err = seccomp.Compile(cfg.Seccomp)
	} else {
		prog, err = seccomp.CompileCached(cfg.Seccomp, cacheDir)
	}
	if err != nil {
		return nil, nil, err
	}
	if memo && cacheDir != "" {
		filters.put(key, prog)
	}
	cfg.Seccomp = nil
	return cfg, prog, nil
}

// checkHelperArgs checks that a HelperSeccomp spec runs a helper that
// loads the filter.
func checkHelperArgs(s *Spec) error {
	if len(s.Args) < 2 || (s.Args[0] != InitPath && s.Args[0] != ExecutorPath) {
		return errors.New("isolate: HelperSeccomp needs sbx's init or executor as the command")
	}
	return nil
}

// filters holds the compiled filters of the built-in profile by
// filterKey, for the life of the process.
var filters = filterMemo{m: map[string][]byte{}}

type filterMemo struct {
	sync.Mutex
	m map[string][]byte
}

func (f *filterMemo) get(key string) []byte {
	f.Lock()
	defer f.Unlock()
	return f.m[key]
}

func (f *filterMemo) put(key string, prog []byte) {
	f.Lock()
	defer f.Unlock()
	if len(f.m) >= 64 { // a few capability sets in practice; bound it anyway
		clear(f.m)
	}
	f.m[key] = prog
}

// filterKey is what the filter a helper loads depends on, and whether it
// may be kept in memory: only the built-in default profile, which depends
// on nothing but the capability set (and the kernel and architecture,
// fixed for a process). A profile file may change between starts, so it is
// read every time.
func filterKey(s *Spec) (string, bool) {
	if !s.HelperSeccomp || s.SeccompProfile != nil || (s.Seccomp != "" && s.Seccomp != seccomp.Default) {
		return "", false
	}
	caps, err := Capabilities(s.CapAdd, s.CapDrop)
	if err != nil {
		return "", false
	}
	return seccomp.Default + "|" + strings.Join(caps, ","), true
}

// libcontainerConfig converts the spec; without withSeccomp it leaves the
// seccomp profile out (the caller has the compiled filter already).
func libcontainerConfig(s *Spec, withSeccomp bool) (*configs.Config, error) {
	var oci *specs.Spec
	var err error
	if withSeccomp {
		oci, err = ociSpec(s, false)
	} else {
		oci, err = s.oci(false)
		if err == nil {
			oci.Linux.Seccomp = nil
		}
	}
	if err != nil {
		return nil, err
	}
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{CgroupName: s.ID, Spec: oci})
	if err != nil {
		return nil, fmt.Errorf("build container config: %w", err)
	}
	if err := seccomp.Check(cfg.Seccomp); err != nil {
		return nil, err
	}
	// Replace runc's permissive defaults (mknod of any device, tun) with the
	// allow-list; a leading deny-all rule is implied by the device manager.
	cfg.Cgroups.Resources.Devices = append([]*config.Rule{{Type: config.WildcardDevice, Major: config.Wildcard, Minor: config.Wildcard, Permissions: "rwm", Allow: false}}, allowedDevices...)
	cfg.ParentDeathSignal = s.ParentDeathSignal
	if cfg.Rlimits, err = configRlimits(s.Rlimits); err != nil {
		return nil, err
	}
	if s.UserNS != nil {
		if err := applyUserNS(cfg, s.UserNS); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// Start creates the container described by s under stateRoot (libcontainer's
// state directory) and starts its PID 1. On error nothing is left behind.
func Start(stateRoot string, s *Spec, stdio IO) (_ *Container, retErr error) {
	if err := CheckInit(); err != nil {
		return nil, err
	}
	cfg, prog, err := build(s, filepath.Join(filepath.Dir(stateRoot), "seccomp"))
	if err != nil {
		return nil, err
	}
	// Where a checkpoint's CRIU options go (see checkpoint.go).
	cfg.Labels = append(cfg.Labels, criuConfigLabel+"="+filepath.Join(stateRoot, s.ID, criuConfigName))
	args := s.Args
	extra := stdio.ExtraFiles
	if prog != nil {
		r, err := programPipe(prog)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		fd := 3 + len(extra)
		extra = append(append([]*os.File{}, extra...), r)
		args = append([]string{args[0], args[1], "--seccomp-fd", strconv.Itoa(fd)}, args[2:]...)
	}
	// libcontainer's init stage runs the small sbx-lcinit when this build
	// has it (see lcinit.go): its handle goes last among the extra files.
	lcinit, err := lcinitFile(filepath.Join(filepath.Dir(stateRoot), "helpers"))
	if err != nil {
		return nil, err
	}
	if lcinit != nil {
		extra = append(append([]*os.File{}, extra...), lcinit)
	}
	if err := cgroup.EnsureParent(cgroup.Limits{}); err != nil {
		return nil, err
	}
	lc, err := libcontainer.Create(stateRoot, s.ID, cfg)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", s.ID, err)
	}
	c := &Container{lc: lc}
	defer func() {
		if retErr != nil {
			_ = c.Destroy()
		}
	}()
	p := &libcontainer.Process{
		Args:       args,
		Env:        s.Env,
		Cwd:        cfg.Rootfs, // replaced below; libcontainer wants the in-root path
		UID:        int(s.UID),
		GID:        int(s.GID),
		Stdin:      stdio.Stdin,
		Stdout:     stdio.Stdout,
		Stderr:     stdio.Stderr,
		ExtraFiles: extra,
		Init:       true,
	}
	p.Cwd = s.Cwd
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	for _, g := range s.AdditionalGIDs {
		p.AdditionalGroups = append(p.AdditionalGroups, int(g))
	}
	var consoleParent *os.File
	if s.Tty {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("console socket: %w", err)
		}
		consoleParent = os.NewFile(uintptr(fds[0]), "console-parent")
		child := os.NewFile(uintptr(fds[1]), "console-child")
		defer consoleParent.Close()
		defer child.Close()
		p.ConsoleSocket = child
		p.ConsoleWidth, p.ConsoleHeight = stdio.ConsoleWidth, stdio.ConsoleHeight
		p.Stdin, p.Stdout, p.Stderr = nil, nil, nil
	}
	if err := lc.Run(p); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", s.ID, err)
	}
	c.proc = p
	if s.Tty {
		master, err := recvFile(consoleParent)
		if err != nil {
			_ = c.Kill()
			_, _ = p.Wait()
			return nil, fmt.Errorf("receive console of sandbox %s: %w", s.ID, err)
		}
		c.console = master
	}
	return c, nil
}

// programPipe returns the read end of a pipe that holds prog.
func programPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp pipe: %w", err)
	}
	defer w.Close()
	if len(prog) > 65536 {
		r.Close()
		return nil, errors.New("seccomp program does not fit in a pipe")
	}
	if _, err := w.Write(prog); err != nil {
		r.Close()
		return nil, fmt.Errorf("write seccomp program: %w", err)
	}
	return r, nil
}

// Load re-attaches to an existing container, e.g. after sbx restarted.
func Load(stateRoot, id string) (*Container, error) {
	lc, err := libcontainer.Load(stateRoot, id)
	if err != nil {
		return nil, fmt.Errorf("load container %s: %w", id, err)
	}
	return &Container{lc: lc}, nil
}

// ID returns the container ID.
func (c *Container) ID() string { return c.lc.ID() }

// Console returns the master side of the sandbox's terminal, or nil.
func (c *Container) Console() *os.File { return c.console }

// Pid returns the host PID of the sandbox's PID 1, or 0.
func (c *Container) Pid() int {
	st, err := c.lc.State()
	if err != nil {
		return 0
	}
	return st.InitProcessPid
}

// Wait waits for PID 1 started by Start to exit and returns its wait
// status. Until PID 1 exits the goroutine waits in the runtime's poller
// (childexit.Exited), holding none of the Go scheduler's Ps: a sandbox's
// reaper, started with the sandbox, would otherwise keep one of a two-CPU
// host's two for up to 10 ms, and the process's other goroutines share
// the other meanwhile (a warm pool's claim right after a fill).
func (c *Container) Wait() (unix.WaitStatus, error) {
	if c.proc == nil {
		return 0, errors.New("container was not started by this process")
	}
	if pid, err := c.proc.Pid(); err == nil {
		_ = childexit.Exited(pid) // on error, the wait below blocks
	}
	ps, err := c.proc.Wait()
	if ps == nil {
		return 0, err
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, fmt.Errorf("sandbox %s: unexpected wait status %T", c.ID(), ps.Sys())
	}
	return unix.WaitStatus(ws), nil
}

// Signal sends sig to the sandbox's PID 1.
func (c *Container) Signal(sig os.Signal) error {
	if err := c.lc.Signal(sig); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
		return fmt.Errorf("signal sandbox %s: %w", c.ID(), err)
	}
	return nil
}

// Kill kills every process of the sandbox: SIGKILL to PID 1 of a PID
// namespace takes all of them with it.
func (c *Container) Kill() error { return c.Signal(unix.SIGKILL) }

// Usage reads what the sandbox has used from its cgroup. It must be called
// before Destroy.
func (c *Container) Usage() (cgroup.Usage, error) {
	state, err := c.lc.State()
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read state of sandbox %s: %w", c.ID(), err)
	}
	// On v1 and hybrid hosts only the files a Usage holds are read: the
	// full statistics of every hierarchy cost about a millisecond at the
	// end of every one-shot run.
	if u, ok, err := cgroup.ReadUsage(state.CgroupPaths); ok {
		if err != nil {
			return cgroup.Usage{}, fmt.Errorf("read usage of sandbox %s: %w", c.ID(), err)
		}
		return u, nil
	}
	st, err := c.lc.Stats()
	if err != nil {
		return cgroup.Usage{}, fmt.Errorf("read usage of sandbox %s: %w", c.ID(), err)
	}
	return cgroup.UsageFrom(st.CgroupStats, state.CgroupPaths), nil
}

// Pause freezes every process of the sandbox.
func (c *Container) Pause() error {
	// The v1 freezer gives up when tasks keep forking while it freezes
	// them ("unable to freeze"), and thaws again: under load a second or
	// third try succeeds where the first lost the race.
	var err error
	for try := 0; try < pauseTries; try++ {
		if err = c.lc.Pause(); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
	}
	return err
}

// pauseTries bounds the attempts of Pause against a busy freezer.
const pauseTries = 4

// Resume thaws a paused sandbox.
func (c *Container) Resume() error { return c.lc.Resume() }

// Status returns libcontainer's view of the container: running, paused,
// stopped or created.
func (c *Container) Status() string {
	st, err := c.lc.Status()
	if err != nil {
		return "unknown"
	}
	return st.String()
}

// Destroy kills what is left of the sandbox and removes its cgroups and
// libcontainer state. It is safe to call more than once.
func (c *Container) Destroy() error {
	if c.console != nil {
		c.console.Close()
		c.console = nil
	}
	if err := c.lc.Destroy(); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", c.ID(), err)
	}
	return nil
}
