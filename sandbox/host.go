package sandbox

import (
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
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
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
	// Images is the image cache's directory [Root/images]. Image GC keeps
	// the layers of this host's sandboxes only: share a cache between
	// roots only when the others' sandboxes are short-lived (a bench).
	Images string
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
	// UserNSDir holds the host-wide leases of user namespace id ranges
	// [userns.DefaultDir, on a tmpfs]. Every sbx process of the host must
	// use the same.
	UserNSDir string
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
	// Executor is a static executor binary, run inside every long-lived
	// sandbox as "EXECUTOR executor [flags]": sbx-executor or a full sbx
	// binary [the sbx-executor embedded in this program, written once
	// under Root/helpers].
	Executor string
	// Init is a static init binary, run as the PID 1 of one-shot runs as
	// "INIT reaper [flags] -- CMD": a static build of
	// cmd/sbx-init/c/sbx-init.c [the sbx-init embedded in this program,
	// written once under Root/helpers].
	Init string
	// CRIU is the criu binary (or launcher) checkpoints run [$SBX_CRIU, else
	// the criu on PATH when it is 4.2 or later, else
	// isolate.DefaultCRIUPath, which make deps installs].
	CRIU string
	// EgressCommand starts the bridge's egress daemon in the background
	// (the CLI: "sbx --root R egressd") when a sandbox's egress policy
	// names hosts and no process runs the daemon [none: this process runs
	// it until Close].
	EgressCommand []string
	// Logger receives the host's logs [slog.Default()].
	Logger *slog.Logger
}

// ReadEnv fills the fields the environment sets and c leaves at zero:
// SBX_MAX_SANDBOXES (a count), SBX_MEMORY_BUDGET (bytes or a size like
// 8g), SBX_SUBNET (an IPv4 CIDR) and SBX_PULL (missing, always, never);
// it checks SBX_CGROUP_PARENT, which the cgroup package reads itself.
// Every sbx process of a host reads them, so all enforce the same limits.
func (c *HostConfig) ReadEnv() error {
	if err := cgroup.ValidateParentEnv(); err != nil {
		return fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
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

	netMu sync.Mutex
	net   *netns.Network

	// egress is the egress daemon this process runs, if any.
	egress egressState

	execBin, initBin helperBinary

	// mountNS keeps each long-lived sandbox's mounts (its writable layer
	// and overlay root) in a mount namespace of its own, off the host's
	// mount table, which every container start copies.
	mountNS *rootfs.Namespaces

	events     *events
	supervisor *supervisor
	// pools counts what this process's claims and pool fills did.
	pools poolStats

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
	_ sbx.Backend   = (*Host)(nil)
)

// Open opens the state under cfg.Root and cfg.RunRoot, creating them if
// needed. It starts nothing in the background; see StartBackground.
func Open(cfg HostConfig) (*Host, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: sandbox.Open needs root (namespaces, cgroups, mounts): run this program as root, or reach a root sbx serve through github.com/sbxrun/sbx/server/client", sbx.ErrForbidden)
	}
	return open(cfg)
}

// open is Open without its root check: the package's tests of what needs
// only the state on disk (names, filters, policy) run as any user.
func open(cfg HostConfig) (*Host, error) {
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
	policy, err := normalizePolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	cfg.Policy = policy
	st, err := state.Open(cfg.Root, cfg.RunRoot)
	if err != nil {
		return nil, err
	}
	h := &Host{
		cfg:     cfg,
		store:   st,
		log:     cfg.Logger,
		now:     time.Now,
		crashAt: os.Getenv("SBX_TEST_CRASH_AT"),
		mountNS: rootfs.NewNamespaces(filepath.Join(st.RunRoot(), mountNSDir)),
	}
	h.events = newEvents()
	h.supervisor = newSupervisor(h)
	return h, nil
}

// Root and RunRoot are the host's state directories.
func (h *Host) Root() string    { return h.store.Root() }
func (h *Host) RunRoot() string { return h.store.RunRoot() }

// Close stops what StartBackground started (the pool is drained) and
// closes the network state. Sandboxes keep running; the next Host
// re-adopts them. Operations after Close still work (they reopen what they
// need); background work does not restart.
func (h *Host) Close() error {
	h.supervisor.stop()
	h.stopEgress()
	h.netMu.Lock()
	defer h.netMu.Unlock()
	if h.net == nil {
		return nil
	}
	err := h.net.Close()
	h.net = nil
	return err
}

// imageStore opens the image cache under Root on first use.
func (h *Host) imageStore() (*imagecache.Store, error) {
	h.imgOnce.Do(func() {
		dir := h.cfg.Images
		if dir == "" {
			dir = filepath.Join(h.store.Root(), "images")
		}
		h.images, h.imgErr = imagecache.Open(dir, imagecache.Options{
			Platform: h.cfg.Platform, InsecureRegistries: h.cfg.InsecureRegistries,
		})
	})
	return h.images, h.imgErr
}

// network opens the bridge network state on first use.
func (h *Host) network() (*netns.Network, error) {
	h.netMu.Lock()
	defer h.netMu.Unlock()
	if h.net == nil {
		n, err := netns.Open(netns.Config{
			StateDir:  filepath.Join(h.store.Root(), "network"),
			RunDir:    filepath.Join(h.store.RunRoot(), "netns"),
			HostNetNS: h.cfg.HostNetNS,
			Subnet:    h.cfg.Subnet,
			Logger:    h.log,
		})
		if err != nil {
			return nil, err
		}
		h.net = n
	}
	return h.net, nil
}

// networkExists reports whether a bridge network was ever set up under
// Root, so that GC need not create one just to look for leftovers.
func (h *Host) networkExists() bool {
	_, err := os.Stat(filepath.Join(h.store.Root(), "network"))
	return err == nil
}

// helpersDir holds the embedded helper binaries, below Root: not the
// tmpfs run root, where a bind mount costs libcontainer's start several
// milliseconds.
const helpersDir = "helpers"

// executorBinary is the executor bind-mounted into long-lived sandboxes as
// their PID 1: HostConfig.Executor, or the embedded sbx-executor.
func (h *Host) executorBinary() (string, error) {
	return h.execBin.get(h, h.cfg.Executor, helperbin.Executor)
}

// initBinary is the init bind-mounted into one-shot sandboxes as their
// PID 1: HostConfig.Init, or the embedded sbx-init.
func (h *Host) initBinary() (string, error) {
	return h.initBin.get(h, h.cfg.Init, helperbin.Init)
}

// helperBinary is one helper binary, found once.
type helperBinary struct {
	once sync.Once
	path string
	err  error
}

// get returns override (which must be static) or the embedded helper
// name, installed under Root/helpers.
func (b *helperBinary) get(h *Host, override, name string) (string, error) {
	b.once.Do(func() {
		if override != "" {
			b.path, b.err = override, helperbin.CheckStatic(override)
			return
		}
		b.path, b.err = helperbin.Install(filepath.Join(h.store.Root(), helpersDir), name)
	})
	return b.path, b.err
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
