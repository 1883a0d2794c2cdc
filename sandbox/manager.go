package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Event is one change of a sandbox's state.
type Event struct {
	Type string    `json:"type"` // one of the Event* constants
	ID   string    `json:"id"`
	Name string    `json:"name,omitempty"`
	Time time.Time `json:"time"`
}

// Event types.
const (
	EventCreated = "created" // recorded; its resources are being made
	EventReady   = "ready"   // the executor answers
	EventPaused  = "paused"
	EventResumed = "resumed"
	EventStopped = "stopped" // PID 1 exited or was stopped
	EventStarted = "started" // a stopped sandbox runs again
	EventExpired = "expired" // its TTL passed; removal follows
	EventRemoved = "removed"
)

func (m *Manager) emit(typ string, sb *Sandbox) {
	if m.cfg.Events != nil {
		m.cfg.Events(Event{Type: typ, ID: sb.ID, Name: sb.Name, Time: m.now().UTC()})
	}
}

// maxSocketPath is the size of sun_path in a unix socket address.
const maxSocketPath = 108

// Config configures a Manager.
type Config struct {
	// Root is the persistent state directory (default /var/lib/sbx).
	Root string
	// RunRoot is the runtime state directory (default /run/sbx).
	RunRoot string
	// MaxSandboxes caps how many sandboxes may exist at once; 0 is no cap.
	MaxSandboxes int
	// MemoryBudget caps the sum of the memory limits of all sandboxes; 0 is
	// no cap. With a budget every sandbox needs a memory limit (or
	// DefaultLimits.MemoryBytes), and the budget is also set as the memory
	// limit of the parent cgroup shared by all sandboxes of the host, so
	// the kernel enforces it. A limit set on that parent by other means is
	// respected by Create as well.
	MemoryBudget int64
	// DefaultLimits fill in the limits a create leaves at zero.
	DefaultLimits Limits
	// ReadyTimeout bounds how long a create waits for the executor to
	// answer (default 15s).
	ReadyTimeout time.Duration
	// Images resolves image references; without it only Options.Rootfs
	// works.
	Images ImageSource
	// Executor is a static executor binary, run inside every sandbox as
	// "EXECUTOR executor [flags]": sbx-executor or a full sbx binary
	// (default: the sbx-executor embedded in this program, written once
	// under Root/helpers).
	Executor string
	// HostNetNS is the network namespace that plays the host for bridge
	// networking (bridge, veths, rules); empty means the namespace sbx runs
	// in. Tests pass a namespace of their own.
	HostNetNS string
	// Subnet is the bridge's IPv4 subnet (netns.Config.Subnet); the zero
	// value picks netns.DefaultSubnet or the next /16 that collides with no
	// route. A bridge that already exists keeps its subnet.
	Subnet netip.Prefix
	// Events, if set, is called after every change of a sandbox's state,
	// in order for each sandbox (it runs while the sandbox is locked: keep
	// it fast). Only changes made through this Manager are reported.
	Events func(Event)
	// Logger receives the Manager's logs (default slog.Default()).
	Logger *slog.Logger
}

// Manager creates and manages sandboxes. Its state lives on disk, so any
// number of Managers in any number of processes may share one Root: each
// operation locks the sandbox it changes.
//
// Every operation first removes sandboxes whose TTL has expired, so TTLs
// hold without a daemon.
type Manager struct {
	cfg   Config
	store *state.Store
	log   *slog.Logger
	// crashAt names a create step at which the process kills itself with
	// SIGKILL (from SBX_TEST_CRASH_AT); tests use it to prove gc undoes
	// every prefix of a create.
	crashAt string
	now     func() time.Time
	netOnce sync.Once
	net     *netns.Network
	netErr  error
	// onAdmit, if set, learns every id Create admits (tests track what
	// they must find released).
	onAdmit func(id string)
}

// New opens the state under cfg.Root and cfg.RunRoot, creating them if
// needed.
func New(cfg Config) (*Manager, error) {
	if cfg.Root == "" {
		cfg.Root = "/var/lib/sbx"
	}
	if cfg.RunRoot == "" {
		cfg.RunRoot = "/run/sbx"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxSandboxes < 0 || cfg.MemoryBudget < 0 {
		return nil, fmt.Errorf("%w: negative sandbox limits", ErrInvalid)
	}
	st, err := state.Open(cfg.Root, cfg.RunRoot)
	if err != nil {
		return nil, err
	}
	if n := len(st.RunDir(state.NewID())) + len("/"+socketDir+"/"+socketName); n >= maxSocketPath {
		return nil, fmt.Errorf("%w: run root %s is too long: executor socket paths would have %d bytes, the kernel allows %d; use a shorter --run-root", ErrInvalid, st.RunRoot(), n, maxSocketPath-1)
	}
	return &Manager{
		cfg:     cfg,
		store:   st,
		log:     cfg.Logger,
		crashAt: os.Getenv("SBX_TEST_CRASH_AT"),
		now:     time.Now,
	}, nil
}

// Resolve turns a full id, a name or a unique id prefix into a full id.
func (m *Manager) Resolve(ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("%w: empty sandbox id or name", ErrInvalid)
	}
	if state.ValidID(ref) == nil {
		if err := m.exists(ref); err != nil {
			return "", err
		}
		return ref, nil
	}
	if id, err := m.store.LookupName(ref); err == nil {
		if m.exists(id) == nil {
			return id, nil
		}
	}
	if !state.IsIDPrefix(ref) {
		return "", fmt.Errorf("sandbox %q: %w", ref, ErrNotFound)
	}
	ids, err := m.store.IDs()
	if err != nil {
		return "", err
	}
	i := sort.SearchStrings(ids, ref)
	var match []string
	for ; i < len(ids) && strings.HasPrefix(ids[i], ref); i++ {
		match = append(match, ids[i])
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("sandbox %q: %w", ref, ErrNotFound)
	case 1:
		return match[0], nil
	}
	return "", fmt.Errorf("%w: %q matches %d sandboxes; give more digits", ErrAmbiguous, ref, len(match))
}

func (m *Manager) exists(id string) error {
	if _, err := os.Stat(m.store.Dir(id)); err != nil {
		return fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	return nil
}

// Get returns the record of the sandbox ref (id, prefix or name) without
// locking it.
func (m *Manager) Get(ctx context.Context, ref string) (*Sandbox, error) {
	m.reapExpired(ctx)
	id, err := m.Resolve(ref)
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := m.store.Read(id, &sb); err != nil {
		if errors.Is(err, state.ErrNoRecord) {
			return &Sandbox{ID: id, Status: StatusCreating}, nil
		}
		return nil, err
	}
	m.checkAlive(&sb)
	return &sb, nil
}

// List returns the sandboxes f selects, oldest first. It reads the records
// without locks: each is a consistent snapshot.
func (m *Manager) List(ctx context.Context, f Filter) ([]*Sandbox, error) {
	m.reapExpired(ctx)
	entries, err := state.ReadAll[Sandbox](m.store)
	if err != nil {
		return nil, err
	}
	out := make([]*Sandbox, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Err == nil:
		case errors.Is(e.Err, state.ErrNoRecord):
			// A create before its first record write (or one that died
			// there): show it as creating.
			e.Record = Sandbox{ID: e.ID, Status: StatusCreating}
		default:
			continue // removed while listing
		}
		m.checkAlive(&e.Record)
		if f.match(&e.Record) {
			out = append(out, &e.Record)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// lock resolves ref and takes the sandbox's lock, reading its record.
func (m *Manager) lock(ctx context.Context, ref string) (*state.Lock, *Sandbox, error) {
	id, err := m.Resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	l, err := m.store.Lock(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var sb Sandbox
	if err := l.Read(&sb); err != nil {
		l.Unlock()
		if errors.Is(err, state.ErrNoRecord) {
			// Its creator died before the first write; only gc can act.
			return nil, nil, fmt.Errorf("sandbox %s was never fully created: run sbx gc: %w", id, ErrState)
		}
		return nil, nil, err
	}
	return l, &sb, nil
}

// crashPoint kills the process with SIGKILL if the SBX_TEST_CRASH_AT
// environment variable names step. It exists so tests can prove that gc
// undoes a create interrupted at any step.
func (m *Manager) crashPoint(step string) {
	if m.crashAt != "" && m.crashAt == step {
		m.log.Warn("SBX_TEST_CRASH_AT: killing myself", "step", step)
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		select {} // never continue past the crash point
	}
}
