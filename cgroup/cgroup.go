package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	ocg "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Root is where cgroup hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// DefaultParent is the cgroup under which every sandbox lives unless
// $SBX_CGROUP_PARENT names another (see Parent).
const DefaultParent = "sbx"

// ParentEnv names the environment variable that overrides DefaultParent:
// one cgroup name ([A-Za-z0-9._-], at most 64 bytes) directly below the
// root of every hierarchy. Tests use it to keep their sandboxes apart from
// everyone else's on a shared host; hosts use it like docker's
// --cgroup-parent. Every sbx process that manages the same sandboxes
// (CLI, server, gc) must see the same value.
const ParentEnv = "SBX_CGROUP_PARENT"

// Parent returns the name of the cgroup under which every sandbox lives:
// $SBX_CGROUP_PARENT when it is a valid name, otherwise DefaultParent.
func Parent() string {
	if p := os.Getenv(ParentEnv); p != "" && validParentName(p) {
		return p
	}
	return DefaultParent
}

// ValidateParentEnv returns an error saying what is wrong with
// $SBX_CGROUP_PARENT, or nil when it is unset or valid; front-ends call it
// at start so that a typo is not silently replaced by DefaultParent.
func ValidateParentEnv() error {
	if p := os.Getenv(ParentEnv); p != "" && !validParentName(p) {
		return fmt.Errorf("invalid %s=%q: want one cgroup name of letters, digits, '.', '_' or '-' (at most 64 bytes), not a path", ParentEnv, p)
	}
	return nil
}

func validParentName(p string) bool {
	if len(p) > 64 || p == "." || p == ".." {
		return false
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Mode is the host's cgroup layout.
type Mode string

// The cgroup layouts sbx supports.
const (
	ModeV1          Mode = "v1"
	ModeHybrid      Mode = "hybrid"
	ModeV2          Mode = "v2"
	ModeUnavailable Mode = "unavailable"
)

// DetectMode returns the host's cgroup mode: what is mounted at Root (a
// cgroup2 file system: v2), else whether a cgroup2 file system is mounted
// at Root/unified (hybrid) or not (v1). It is read once per process.
func DetectMode() Mode { return detectMode() }

var detectMode = sync.OnceValue(func() Mode {
	var st unix.Statfs_t
	if err := unix.Statfs(Root, &st); err != nil {
		return ModeUnavailable
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return ModeV2
	}
	if err := unix.Statfs(filepath.Join(Root, "unified"), &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return ModeHybrid
	}
	return ModeV1
})

// v1Controllers are the v1 hierarchies Controllers looks for below Root
// ("systemd" is the name=systemd hierarchy).
var v1Controllers = []string{"systemd", "freezer", "pids", "net_cls", "net_prio", "perf_event", "cpuset", "cpu",
	"cpuacct", "memory", "blkio", "rdma", "devices", "hugetlb"}

// Controllers lists the controllers that sbx can use for limits on this
// host: the v1 hierarchies in v1 and hybrid mode, the root's controllers in v2.
func Controllers() ([]string, error) {
	switch DetectMode() {
	case ModeV2:
		data, err := os.ReadFile(filepath.Join(Root, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("read cgroup.controllers: %w", err)
		}
		return strings.Fields(string(data)), nil
	case ModeV1, ModeHybrid:
		var names []string
		for _, c := range v1Controllers {
			if _, err := os.Lstat(filepath.Join(Root, c)); err == nil {
				names = append(names, c)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("list cgroup v1 subsystems: none mounted below %s", Root)
		}
		sort.Strings(names)
		return names, nil
	}
	return nil, errors.New("no cgroup filesystem mounted at " + Root)
}

// Limits are the resource limits of one sandbox. Zero means unlimited.
type Limits struct {
	MemoryBytes int64   // memory limit; swap is disabled when set
	CPUs        float64 // CPU quota in CPUs, e.g. 0.5
	Pids        int64   // maximum number of processes
}

// InitPidsAllowance is added to a sandbox's pids limit for sbx's own init
// (the reaper or the executor): its Go runtime threads count as tasks, and
// the limit is meant for the sandboxed command.
const InitPidsAllowance = 16

// WithInitAllowance returns the limits with InitPidsAllowance added to a
// pids limit, for the cgroup of a sandbox whose PID 1 is sbx's init.
func (l Limits) WithInitAllowance() Limits {
	if l.Pids > 0 {
		l.Pids += InitPidsAllowance
	}
	return l
}

// cpuPeriod is the CFS period used for CPU quotas, in microseconds.
const cpuPeriod = 100000

// Validate checks that the limits make sense.
func (l Limits) Validate() error {
	if l.MemoryBytes < 0 || (l.MemoryBytes > 0 && l.MemoryBytes < 6<<20) {
		return fmt.Errorf("memory limit %d is too small: use at least 6 MiB", l.MemoryBytes)
	}
	if l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
		return fmt.Errorf("invalid CPU limit %v", l.CPUs)
	}
	if l.CPUs > 0 && l.CPUs*cpuPeriod < 1000 {
		return fmt.Errorf("CPU limit %v is too small: use at least 0.01", l.CPUs)
	}
	if l.Pids < 0 {
		return fmt.Errorf("invalid pids limit %d", l.Pids)
	}
	return nil
}

// SwapControllable reports whether the host lets sbx disable swap for a
// sandbox (memory.memsw.* on v1, memory.swap.max on v2).
func SwapControllable() bool {
	switch DetectMode() {
	case ModeV2:
		return true // memory.swap.max exists wherever the memory controller does
	default:
		_, err := os.Stat(filepath.Join(Root, "memory", "memory.memsw.limit_in_bytes"))
		return err == nil
	}
}

// OCIResources converts limits into the OCI runtime-spec form that
// libcontainer's spec conversion takes.
func (l Limits) OCIResources() *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.MemoryBytes > 0 {
		limit := l.MemoryBytes
		r.Memory = &specs.LinuxMemory{Limit: &limit}
		if SwapControllable() {
			swap := l.MemoryBytes // memory+swap equal to memory: no swap
			r.Memory.Swap = &swap
		}
	}
	if l.CPUs > 0 {
		quota := int64(math.Round(l.CPUs * cpuPeriod))
		period := uint64(cpuPeriod)
		r.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	if l.Pids > 0 {
		pids := l.Pids
		r.Pids = &specs.LinuxPids{Limit: &pids}
	}
	return r
}

// EnsureParent creates the parent cgroup (Parent) in every hierarchy
// if it does not exist yet, as libcontainer creates a container's (on v2
// also enabling the root's controllers for the cgroups below it).
// Per-sandbox cgroups are created below it by libcontainer. Budget limits
// for all sandboxes together can be given (memory, CPU quota, pids; zero
// leaves one unset).
func EnsureParent(budget Limits) error {
	mode := DetectMode()
	parent := Parent()
	if budget == (Limits{}) && parentExists(mode) {
		return nil // the common case on the start path: one stat
	}
	res := &ocg.Resources{SkipDevices: true}
	if budget.MemoryBytes > 0 {
		res.Memory = budget.MemoryBytes
		if SwapControllable() {
			res.MemorySwap = budget.MemoryBytes // memory+swap equal to memory: no swap
		}
	}
	if budget.CPUs > 0 {
		res.CpuQuota, res.CpuPeriod = int64(math.Round(budget.CPUs*cpuPeriod)), cpuPeriod
	}
	if budget.Pids > 0 {
		res.PidsLimit = &budget.Pids
	}
	// Apply creates the directories of every hierarchy, devices included
	// (so not SkipDevices there); Set writes the budget and leaves the
	// device rules alone.
	cfg := &ocg.Cgroup{Path: "/" + parent, Resources: &ocg.Resources{}}
	var m ocg.Manager
	var err error
	switch mode {
	case ModeV2:
		m, err = fs2.NewManager(cfg, filepath.Join(Root, parent))
	case ModeV1, ModeHybrid:
		m, err = fs.NewManager(cfg, nil)
	default:
		return errors.New("cgroups are not available on this host")
	}
	if err == nil {
		err = m.Apply(-1) // creates the directories, moves no process
	}
	if err == nil && budget != (Limits{}) {
		err = m.Set(res)
	}
	if err != nil {
		return fmt.Errorf("create parent cgroup %s: %w", parent, err)
	}
	return nil
}

// parentExists reports whether the parent cgroup is already there.
func parentExists(mode Mode) bool {
	p := filepath.Join(Root, Parent())
	if mode != ModeV2 {
		p = filepath.Join(Root, "memory", Parent())
	}
	_, err := os.Stat(p)
	return err == nil
}

// SandboxPath returns the cgroup path of sandbox id below the parent.
func SandboxPath(id string) string { return "/" + Parent() + "/" + id }

// RemoveParentIfEmpty removes the parent cgroup from every hierarchy when no
// sandbox uses it any more. A busy parent is left alone.
func RemoveParentIfEmpty() error {
	dirs, _ := filepath.Glob(filepath.Join(Root, "*", Parent()))
	dirs = append(dirs, filepath.Join(Root, Parent()))
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) && !errors.Is(err, os.ErrExist) && !isBusy(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveParentWhenEmpty is RemoveParentIfEmpty for a process that owns its
// parent (a test binary's private one): a cgroup v2 parent stays busy for a
// moment after its last sandbox was killed, while the dying tasks leave it,
// so it tries again until the parent is gone or wait has passed.
func RemoveParentWhenEmpty(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := RemoveParentIfEmpty()
		left, _ := filepath.Glob(filepath.Join(Root, "*", Parent()))
		if _, statErr := os.Stat(filepath.Join(Root, Parent())); statErr == nil {
			left = append(left, filepath.Join(Root, Parent()))
		}
		if err != nil || len(left) == 0 || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isBusy(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		s := pe.Err.Error()
		return strings.Contains(s, "busy") || strings.Contains(s, "not empty")
	}
	return false
}

// Leftovers lists per-sandbox cgroup directories under the parent in every
// hierarchy, keyed by sandbox ID, so that gc can remove those of dead
// sandboxes.
func Leftovers() map[string][]string {
	out := map[string][]string{}
	dirs, _ := filepath.Glob(filepath.Join(Root, "*", Parent(), "*"))
	more, _ := filepath.Glob(filepath.Join(Root, Parent(), "*"))
	for _, d := range append(dirs, more...) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out[filepath.Base(d)] = append(out[filepath.Base(d)], d)
		}
	}
	return out
}

// RemovePaths removes cgroup directories (deepest first), killing nothing:
// a cgroup that still has processes is reported as an error.
func RemovePaths(paths []string) error {
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	var errs []error
	for _, p := range paths {
		if err := ocg.RemovePath(p); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
