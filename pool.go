package sbx

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// PoolSpec defines a warm pool: Size sandboxes started ahead with Options
// and kept idle, their executor answering. A Create whose options match
// a pool's key (the fields OptionClasses classes PoolKey: the image by
// digest, network mode, seccomp, capabilities, user namespace, read-only
// root) claims one of them instead of starting a sandbox, and gets
// everything else it asks for applied to it before it returns.
type PoolSpec struct {
	// Name names the pool: letters, digits, '.', '_' and '-', starting
	// with a letter or digit, at most 64 bytes.
	Name string `json:"name"`
	// Size is how many idle members the pool keeps.
	Size int `json:"size"`
	// Options are what members start with. The fields OptionClasses marks
	// Claimant (name, labels, TTL, publish, auto_remove, volumes, tmpfs)
	// must be empty: they belong to the sandbox a claim returns.
	//
	// Options.Cmd, when set, is the members' main command (a server, an
	// agent), booted when a member starts, with Options.Env, Workdir
	// (created when missing) and User, and still running when the member
	// is claimed. Such a member is claimed only by a create that asks for
	// the same Cmd, Env and Workdir; it gets the member with its command
	// running rather than starting it.
	Options Options `json:"options"`
	// KeyEnv names variables of the main command's environment set to a
	// key of the member's own: 32 random bytes in hex, fresh for every
	// member, the same in each named variable (a server's API key). A
	// create need not give them; the claimant learns the key from the
	// claim (sandbox.Host.Claim). It needs Options.Cmd.
	KeyEnv []string `json:"key_env,omitempty"`
	// ReadyCheck, when set, is a check the main command must pass before a
	// member can be claimed (a server that has booted). It needs
	// Options.Cmd.
	ReadyCheck *ReadyCheck `json:"ready_check,omitempty"`
}

// PoolStats are what one process (a server: sandbox.Host.PoolStats) saw
// of a pool since it started: claims that took a member (hits), creates
// and claims of its key that found none (misses), claim hooks that failed,
// and member boots (main command started and ready check passed) with
// their time; LastError is why the latest boot failed, if it did.
type PoolStats struct {
	Hits         uint64  `json:"hits"`
	Misses       uint64  `json:"misses"`
	HookFailures uint64  `json:"hook_failures"`
	Boots        uint64  `json:"boots"`
	BootFailures uint64  `json:"boot_failures"`
	BootSeconds  float64 `json:"boot_seconds"`      // all boots together
	LastBootS    float64 `json:"last_boot_seconds"` // the latest boot
	LastError    string  `json:"last_error,omitempty"`
}

// ReadyCheck is an HTTP GET of Path on TCP Port of the sandbox's loopback.
// It passes on a 2xx reply whose body contains Body (any body when Body is
// empty); it fails at once on a 4xx reply (the server is up and refuses),
// and when the main command ends or Timeout (default 10 minutes) passes.
//
// With Command set instead of Port and Path, the check is that command,
// run in the member (as its main command's user, in its directory) until
// it exits 0, as E2B templates' ready commands are: a start command and a
// ready command make a template whose members are claimed warm.
//
// In JSON timeout is a duration string ("90s") or a number of seconds.
type ReadyCheck struct {
	Port    int           `json:"port,omitempty"`
	Path    string        `json:"path,omitempty"`
	Body    string        `json:"body,omitempty"`
	Command []string      `json:"command,omitempty"`
	Timeout time.Duration `json:"-"`
}

// readyCheckJSON is ReadyCheck without its methods, for the JSON codec.
type readyCheckJSON ReadyCheck

// readyCheckWire is a ReadyCheck's JSON: the timeout a duration string.
type readyCheckWire struct {
	readyCheckJSON
	Timeout Duration `json:"timeout,omitempty"`
}

// MarshalJSON writes Timeout as a duration string.
func (r ReadyCheck) MarshalJSON() ([]byte, error) {
	return json.Marshal(readyCheckWire{readyCheckJSON(r), Duration(r.Timeout)})
}

// UnmarshalJSON reads a ReadyCheck, refusing unknown fields; timeout is a
// duration string or a number of seconds.
func (r *ReadyCheck) UnmarshalJSON(data []byte) error {
	var v readyCheckWire
	if err := strictUnmarshal(data, &v); err != nil {
		return err
	}
	*r = ReadyCheck(v.readyCheckJSON)
	r.Timeout = time.Duration(v.Timeout)
	return nil
}

// Pool is a pool's definition with its members now.
type Pool struct {
	PoolSpec
	// Key identifies what a create must match to claim a member; it
	// changes when the image's tag moves to another digest.
	Key string `json:"key"`
	// Ready are the ids of idle members whose executor answered at start.
	Ready []string `json:"ready"`
	// Starting counts members being created now.
	Starting int `json:"starting"`
	// Created is when the pool was defined.
	Created time.Time `json:"created"`
}

// PoolReport says what a pool operation removed or started.
type PoolReport struct {
	// Removed are the members removed (drain, rm, stale members of fill).
	Removed []string `json:"removed,omitempty"`
	// Started are the members started (fill).
	Started []string `json:"started,omitempty"`
}

// Pools manages warm pools. *sandbox.Host implements it on this machine,
// *client.Client against a server.
type Pools interface {
	// CreatePool defines a pool; members start with FillPool (the CLI's
	// sbx pool fill) or in a server's background. It fails with
	// ErrNameInUse if the name is taken.
	CreatePool(ctx context.Context, spec PoolSpec) (*Pool, error)
	// ListPools returns every pool, by name.
	ListPools(ctx context.Context) ([]*Pool, error)
	// GetPool returns one pool.
	GetPool(ctx context.Context, name string) (*Pool, error)
	// FillPool starts members until the pool holds Size ready ones, and
	// removes members that no longer match its key.
	FillPool(ctx context.Context, name string) (*PoolReport, error)
	// DrainPool removes every idle member; the definition stays (a
	// server refills it).
	DrainPool(ctx context.Context, name string) (*PoolReport, error)
	// RemovePool drains the pool and removes its definition.
	RemovePool(ctx context.Context, name string) (*PoolReport, error)
}

// ValidPoolName checks a pool name; the error wraps ErrInvalid.
func ValidPoolName(name string) error {
	if !validName(name, 64) {
		return fmt.Errorf("%w: pool name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64 bytes", ErrInvalid, name)
	}
	return nil
}

// MaxPoolSize caps PoolSpec.Size.
const MaxPoolSize = 1000

// Validate checks what needs no host; errors wrap ErrInvalid.
func (p *PoolSpec) Validate() error {
	if err := ValidPoolName(p.Name); err != nil {
		return err
	}
	if p.Size < 0 || p.Size > MaxPoolSize {
		return fmt.Errorf("%w: pool size %d: use 0 to %d", ErrInvalid, p.Size, MaxPoolSize)
	}
	o := &p.Options
	if set := OptionsSet(o, PoolClaim, true); len(set) > 0 {
		return fmt.Errorf("%w: a pool's options must not set %s: they belong to the sandbox a create claims from it", ErrInvalid, strings.Join(set, ", "))
	}
	if set := OptionsSet(o, PoolUnclaimable, false); len(set) > 0 {
		return fmt.Errorf("%w: a pool's options must not set %s: no claim can apply it, a create that sets it starts cold", ErrInvalid, strings.Join(set, ", "))
	}
	if err := p.validateBoot(); err != nil {
		return err
	}
	if o.Image == "" && o.Rootfs == "" {
		return fmt.Errorf("%w: a pool needs an image or a root directory", ErrInvalid)
	}
	return o.Validate()
}

// EachPool calls op (FillPool, DrainPool, RemovePool) on each named pool,
// or with no names on every pool, and report with each pool's report;
// it stops at the first error, naming the pool.
func EachPool(ctx context.Context, p Pools, names []string, op func(Pools, context.Context, string) (*PoolReport, error), report func(name string, rep *PoolReport)) error {
	if len(names) == 0 {
		list, err := p.ListPools(ctx)
		if err != nil {
			return err
		}
		for _, pl := range list {
			names = append(names, pl.Name)
		}
	}
	for _, n := range names {
		rep, err := op(p, ctx, n)
		if rep != nil {
			report(n, rep)
		}
		if err != nil {
			return fmt.Errorf("pool %s: %w", n, err)
		}
	}
	return nil
}

// validateBoot checks what a pool with a main command adds.
func (p *PoolSpec) validateBoot() error {
	if len(p.Options.Cmd) == 0 && (len(p.KeyEnv) > 0 || p.ReadyCheck != nil) {
		return fmt.Errorf("%w: a pool's key_env and ready_check need a main command (cmd) that its members boot", ErrInvalid)
	}
	for _, name := range p.KeyEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("%w: key_env: %q is not a variable name", ErrInvalid, name)
		}
	}
	if r := p.ReadyCheck; r != nil && len(r.Command) > 0 {
		if r.Port != 0 || r.Path != "" || r.Body != "" {
			return fmt.Errorf("%w: ready: give a command or a port and path, not both", ErrInvalid)
		}
		if r.Command[0] == "" {
			return fmt.Errorf("%w: ready: the command is empty", ErrInvalid)
		}
	} else if r != nil {
		if r.Port <= 0 || r.Port > 65535 {
			return fmt.Errorf("%w: ready: port %d is out of range (1-65535)", ErrInvalid, r.Port)
		}
		if !strings.HasPrefix(r.Path, "/") {
			return fmt.Errorf("%w: ready: path %q must start with /", ErrInvalid, r.Path)
		}
		if r.Timeout < 0 {
			return fmt.Errorf("%w: ready: timeout must not be negative", ErrInvalid)
		}
	}
	return nil
}
