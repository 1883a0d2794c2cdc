package sandbox

import (
	"debug/elf"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/isolate/initbin"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox/state"
)

// HostConfig configures a Host. Zero values take the defaults in
// brackets.
type HostConfig struct {
	// Root is the persistent state directory: sandbox records, the image
	// cache, network leases [/var/lib/sbx].
	Root string
	// RunRoot is the runtime state directory: mounts, sockets, container
	// state [/run/sbx].
	RunRoot string
	// Policy limits what callers may ask for: host paths, host
	// networking, privileges. Nil allows everything, as the CLI does on
	// its own host; a server passes the policy of its flags.
	Policy *sbx.Policy
	// MaxSandboxes caps how many sandboxes may exist at once [no cap].
	MaxSandboxes int
	// MemoryBudget caps the sum of the memory limits of all sandboxes [no
	// cap]. With a budget every sandbox needs a memory limit (or
	// DefaultLimits.MemoryBytes), and the budget is also set on the parent
	// cgroup of all sandboxes, so the kernel enforces it.
	MemoryBudget int64
	// DefaultLimits fill in the limits a create leaves at zero.
	DefaultLimits sbx.Limits
	// ReadyTimeout bounds how long a create waits for the executor [15s].
	ReadyTimeout time.Duration
	// Pull is the pull policy of creates and runs that give none:
	// missing, always or never [missing].
	Pull string
	// Platform picks from multi-arch images (os/arch[/variant]) [this
	// host's].
	Platform string
	// InsecureRegistries are registries (host[:port]) reached over plain
	// HTTP; localhost and 127.0.0.1 always are.
	InsecureRegistries []string
	// Subnet is the bridge's IPv4 subnet [10.88.0.0/16, or the next /16
	// that collides with no route]. A bridge that exists keeps its subnet.
	Subnet netip.Prefix
	// HostNetNS is the network namespace that plays the host for bridge
	// networking [the one sbx runs in]. Tests pass one of their own.
	HostNetNS string
	// NetworkPool is how many prepared bridged network namespaces Start
	// keeps waiting, refilled after each bridged create and drained at
	// Close [none].
	NetworkPool int
	// WatchInterval is how often Start's watcher looks for changes made
	// by other processes (the CLI, a dying PID 1, an OOM kill) [1s].
	WatchInterval time.Duration
	// Helper is a statically linked sbx binary to run as the sandboxes'
	// executor [the running executable, which must then be static].
	Helper string
	// Logger receives the host's logs [slog.Default()].
	Logger *slog.Logger
}

// ReadEnv fills the fields the environment sets and c leaves at zero:
// SBX_MAX_SANDBOXES (a count), SBX_MEMORY_BUDGET (bytes or a size like
// 8g), SBX_SUBNET (an IPv4 CIDR) and SBX_PULL (missing, always, never).
// Every sbx process of a host reads them, so all enforce the same limits.
func (c *HostConfig) ReadEnv() error {
	if v := os.Getenv("SBX_MAX_SANDBOXES"); v != "" && c.MaxSandboxes == 0 {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: SBX_MAX_SANDBOXES %q: want a count", sbx.ErrInvalid, v)
		}
		c.MaxSandboxes = n
	}
	if v := os.Getenv("SBX_MEMORY_BUDGET"); v != "" && c.MemoryBudget == 0 {
		n, err := sbx.ParseSize(v)
		if err != nil {
			return fmt.Errorf("%w: SBX_MEMORY_BUDGET %q: want a size like 8g", sbx.ErrInvalid, v)
		}
		c.MemoryBudget = n
	}
	if v := os.Getenv("SBX_SUBNET"); v != "" && !c.Subnet.IsValid() {
		p, err := ParseSubnet("SBX_SUBNET", v)
		if err != nil {
			return err
		}
		c.Subnet = p
	}
	if v := os.Getenv("SBX_PULL"); v != "" && c.Pull == "" {
		if _, err := imagecache.ParsePullPolicy(v); err != nil {
			return fmt.Errorf("%w: SBX_PULL: %w", sbx.ErrInvalid, err)
		}
		c.Pull = v
	}
	return nil
}

// ParseSubnet reads a bridge subnet given as what (a flag or variable).
func ParseSubnet(what, v string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(v)
	if err != nil || !p.Addr().Is4() || p.Bits() < 8 || p.Bits() > 28 {
		return netip.Prefix{}, fmt.Errorf("%w: %s %q: want an IPv4 CIDR between /8 and /28, e.g. 10.77.0.0/16", sbx.ErrInvalid, what, v)
	}
	return p.Masked(), nil
}

// Host runs sandboxes on this machine. It implements sbx.Sandboxes and
// sbx.Images. Its state lives on disk, so any number of Hosts in any
// number of processes may share one Root (a CLI and a server do): each
// operation locks the sandbox it changes.
//
// Every operation first removes sandboxes whose TTL has expired, so TTLs
// hold without a daemon.
type Host struct {
	cfg   HostConfig
	store *state.Store
	log   *slog.Logger
	now   func() time.Time

	imgOnce sync.Once
	images  *imagecache.Store
	imgErr  error

	netOnce sync.Once
	net     *netns.Network
	netErr  error

	helperOnce sync.Once
	helperPath string
	helperErr  error
	initOnce   sync.Once
	initPath   string
	initErr    error

	events *events

	// crashAt names a create step at which the process kills itself with
	// SIGKILL (from SBX_TEST_CRASH_AT); tests use it to prove that GC
	// undoes every prefix of a create.
	crashAt string
	// onAdmit, if set, learns every id Create admits (tests track what
	// they must find released).
	onAdmit func(id string)
}

var (
	_ sbx.Sandboxes = (*Host)(nil)
	_ sbx.Images    = (*Host)(nil)
)

// Open opens the state under cfg.Root and cfg.RunRoot, creating them if
// needed. It starts nothing in the background; see StartBackground.
func Open(cfg HostConfig) (*Host, error) {
	if cfg.Root == "" {
		cfg.Root = "/var/lib/sbx"
	}
	if cfg.RunRoot == "" {
		cfg.RunRoot = "/run/sbx"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 15 * time.Second
	}
	if cfg.WatchInterval <= 0 {
		cfg.WatchInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxSandboxes < 0 || cfg.MemoryBudget < 0 || cfg.NetworkPool < 0 {
		return nil, fmt.Errorf("%w: negative sandbox limits or pool size", sbx.ErrInvalid)
	}
	if cfg.Pull != "" {
		if _, err := imagecache.ParsePullPolicy(cfg.Pull); err != nil {
			return nil, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
		}
	}
	if cfg.Policy != nil {
		p := *cfg.Policy
		p.AllowedHostDirs = append([]string(nil), p.AllowedHostDirs...)
		for i, d := range p.AllowedHostDirs {
			if !filepath.IsAbs(d) {
				return nil, fmt.Errorf("%w: allowed host directory %q must be absolute", sbx.ErrInvalid, d)
			}
			p.AllowedHostDirs[i] = filepath.Clean(d)
		}
		cfg.Policy = &p
	}
	st, err := state.Open(cfg.Root, cfg.RunRoot)
	if err != nil {
		return nil, err
	}
	if n := len(st.RunDir(state.NewID())) + len("/"+socketDir+"/"+socketName); n >= maxSocketPath {
		return nil, fmt.Errorf("%w: run root %s is too long: executor socket paths would have %d bytes, the kernel allows %d; use a shorter --run-root", sbx.ErrInvalid, st.RunRoot(), n, maxSocketPath-1)
	}
	h := &Host{
		cfg:     cfg,
		store:   st,
		log:     cfg.Logger,
		now:     time.Now,
		crashAt: os.Getenv("SBX_TEST_CRASH_AT"),
	}
	h.events = newEvents(h)
	return h, nil
}

// Root and RunRoot are the host's state directories.
func (h *Host) Root() string    { return h.store.Root() }
func (h *Host) RunRoot() string { return h.store.RunRoot() }

// Close stops what StartBackground started (the pool is drained), and closes the
// network state. Sandboxes keep running; the next Host re-adopts them.
func (h *Host) Close() error {
	h.events.stop()
	if h.net != nil {
		return h.net.Close()
	}
	return nil
}

// imageStore opens the image cache under Root on first use.
func (h *Host) imageStore() (*imagecache.Store, error) {
	h.imgOnce.Do(func() {
		h.images, h.imgErr = imagecache.Open(filepath.Join(h.store.Root(), "images"), imagecache.Options{
			Platform: h.cfg.Platform, InsecureRegistries: h.cfg.InsecureRegistries,
		})
	})
	return h.images, h.imgErr
}

// network opens the bridge network state on first use.
func (h *Host) network() (*netns.Network, error) {
	h.netOnce.Do(func() {
		h.net, h.netErr = netns.Open(netns.Config{
			StateDir:  filepath.Join(h.store.Root(), "network"),
			RunDir:    filepath.Join(h.store.RunRoot(), "netns"),
			HostNetNS: h.cfg.HostNetNS,
			Subnet:    h.cfg.Subnet,
			Logger:    h.log,
		})
	})
	return h.net, h.netErr
}

// networkExists reports whether a bridge network was ever set up under
// Root, so that GC need not create one just to look for leftovers.
func (h *Host) networkExists() bool {
	_, err := os.Stat(filepath.Join(h.store.Root(), "network"))
	return err == nil
}

// helper is the sbx binary bind-mounted into long-lived sandboxes as their
// executor: HostConfig.Helper, or the running executable, which must be
// statically linked to run inside any image.
func (h *Host) helper() (string, error) {
	h.helperOnce.Do(func() {
		if h.cfg.Helper != "" {
			h.helperPath = h.cfg.Helper
			return
		}
		exe, err := os.Executable()
		if err != nil {
			h.helperErr = fmt.Errorf("find the sbx binary to run as the executor: %w", err)
			return
		}
		h.helperPath, h.helperErr = exe, requireStatic(exe)
	})
	return h.helperPath, h.helperErr
}

// requireStatic fails if exe is dynamically linked: inside an image its
// interpreter and libraries do not exist.
func requireStatic(exe string) error {
	f, err := elf.Open(exe)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", exe, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked and cannot run inside a sandbox: build it statically (make build) or set HostConfig.Helper to a static sbx binary", exe)
		}
	}
	return nil
}

// oneShotInit returns the binary that runs as the PID 1 of one-shot runs
// and its path inside the sandbox: the small embedded sbx-init, written
// once under Root (not the tmpfs run root: bind-mounting a file from tmpfs
// costs libcontainer's start several milliseconds), else the helper run
// as "sbx reaper".
func (h *Host) oneShotInit(foreignRoot bool) (source, target string, err error) {
	h.initOnce.Do(func() {
		var ok bool
		h.initPath, ok, h.initErr = initbin.Extract(filepath.Join(h.store.Root(), "init"))
		if h.initErr == nil && !ok {
			h.initPath = ""
		}
	})
	if h.initErr != nil {
		return "", "", h.initErr
	}
	if h.initPath != "" {
		return h.initPath, initPathInSandbox, nil
	}
	if h.cfg.Helper != "" {
		return h.cfg.Helper, helperPathInSandbox, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find the sbx binary to run as init: %w", err)
	}
	if foreignRoot {
		if err := requireStatic(exe); err != nil {
			return "", "", err
		}
	}
	return exe, helperPathInSandbox, nil
}

// crashPoint kills the process with SIGKILL if SBX_TEST_CRASH_AT names
// step. It exists so tests can prove that GC undoes a create interrupted
// at any step.
func (h *Host) crashPoint(step string) {
	if h.crashAt != "" && h.crashAt == step {
		h.log.Warn("SBX_TEST_CRASH_AT: killing myself", "step", step)
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		select {} // never continue past the crash point
	}
}
