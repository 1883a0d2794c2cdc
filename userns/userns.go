// Package userns gives sandboxes user namespaces: a range of host user and
// group ids of their own, leased host-wide so that no two live sandboxes
// share one, and the namespace that maps the sandbox's ids 0..Size-1 onto
// it. Root in such a sandbox is an unprivileged host id for every
// per-user kernel limit and every file it creates.
package userns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Defaults of the host-wide allocator: ranges of 65536 ids (a full 16-bit
// id space in the sandbox) from host id 2^30 on, far above the ranges
// /etc/subuid hands to users.
const (
	DefaultDir   = "/run/sbx-userns"
	DefaultBase  = 1 << 30
	DefaultSize  = 65536
	DefaultCount = 4096
)

// Range is one sandbox's ids on the host: sandbox id i is host id
// HostID+i, for uids and gids alike.
type Range struct {
	HostID uint32 `json:"host_id"`
	Size   uint32 `json:"size"`
}

// Contains reports whether host id is in the range.
func (r Range) Contains(id uint32) bool { return id >= r.HostID && id-r.HostID < r.Size }

// Allocator leases ranges to owners. Leases are files named after the
// range's index in Dir, created with O_EXCL and holding the owner, so
// every sbx process on the host (any --root) shares one allocator. Dir is
// on a tmpfs: after a reboot no process uses any range.
type Allocator struct {
	dir        string
	base, size uint32
	count      int
}

// Open returns the allocator whose leases live in dir ("" for DefaultDir).
func Open(dir string) (*Allocator, error) {
	if dir == "" {
		dir = DefaultDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("user namespace leases: %w", err)
	}
	return &Allocator{dir: dir, base: DefaultBase, size: DefaultSize, count: DefaultCount}, nil
}

// ErrExhausted means every range is leased.
var ErrExhausted = errors.New("every user namespace range is in use")

// Acquire leases a free range to owner, or returns the range owner holds
// already (a stopped sandbox started again keeps its ids).
func (a *Allocator) Acquire(owner string) (Range, error) {
	if owner == "" || strings.ContainsAny(owner, "\n\x00") {
		return Range{}, fmt.Errorf("invalid user namespace lease owner %q", owner)
	}
	if r, ok, err := a.Lookup(owner); err != nil || ok {
		return r, err
	}
	for i := 0; i < a.count; i++ {
		p := filepath.Join(a.dir, strconv.Itoa(i))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return Range{}, fmt.Errorf("lease user namespace range %d: %w", i, err)
		}
		_, werr := f.WriteString(owner)
		if err := errors.Join(werr, f.Close()); err != nil {
			os.Remove(p)
			return Range{}, fmt.Errorf("lease user namespace range %d: %w", i, err)
		}
		return a.rangeOf(i), nil
	}
	return Range{}, fmt.Errorf("%w (%d ranges of %d ids from %d): remove sandboxes", ErrExhausted, a.count, a.size, a.base)
}

func (a *Allocator) rangeOf(i int) Range {
	return Range{HostID: a.base + uint32(i)*a.size, Size: a.size}
}

// Lookup returns the range owner holds, if any.
func (a *Allocator) Lookup(owner string) (Range, bool, error) {
	leases, err := a.Leases()
	if err != nil {
		return Range{}, false, err
	}
	r, ok := leases[owner]
	return r, ok, nil
}

// Release gives back the range owner holds; releasing nothing is no error.
func (a *Allocator) Release(owner string) error {
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return fmt.Errorf("user namespace leases: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(a.dir, e.Name())
		if data, err := os.ReadFile(p); err == nil && string(data) == owner {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("release user namespace range %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// Leases maps every owner to its range.
func (a *Allocator) Leases() (map[string]Range, error) {
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("user namespace leases: %w", err)
	}
	out := map[string]Range{}
	for _, e := range ents {
		i, err := strconv.Atoi(e.Name())
		if err != nil || i < 0 || i >= a.count {
			continue
		}
		data, err := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if err != nil || len(data) == 0 {
			continue
		}
		out[string(data)] = a.rangeOf(i)
	}
	return out, nil
}

// New makes a user namespace that maps ids 0..r.Size-1 onto r and returns
// a handle to it (an nsfs file). It costs the start of a process: a child
// of this program is cloned into the new namespace, its maps are written,
// and it is stopped by PTRACE_TRACEME before it runs anything and then
// killed (as runc does for id-mapped mounts).
//
// The namespace is owned by host id r.HostID, not by root: the kernel
// charges what the sandbox uses of every per-user limit (inotify
// instances, user namespaces, ...) to the namespace's owner in the host's
// namespace too, so a namespace owned by root would still share root's
// limits. The clone is therefore made from a thread whose effective ids
// are r.HostID (keeping its capabilities, SECBIT_NO_SETUID_FIXUP, so it
// can still write the maps), and the thread is restored afterwards.
func New(r Range) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err, restored := newOwned(r)
		if restored {
			runtime.UnlockOSThread()
		} // else the thread's credentials are unknown: it ends with the goroutine
		done <- result{f, err}
	}()
	res := <-done
	return res.f, res.err
}

// newOwned runs on a locked thread; restored says whether the thread's
// credentials are back to what they were.
func newOwned(r Range) (f *os.File, err error, restored bool) {
	bits, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0)
	if errno != 0 {
		return nil, fmt.Errorf("read securebits: %w", errno), true
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits|secbitNoSetuidFixup, 0); errno != 0 {
		return nil, fmt.Errorf("keep capabilities across a uid change: %w", errno), true
	}
	restore := func() bool {
		_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0))
		_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), 0, ^uintptr(0))
		_, _, e3 := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits, 0)
		return e1 == 0 && e2 == 0 && e3 == 0
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(r.HostID), ^uintptr(0)); errno != 0 {
		return nil, fmt.Errorf("become the namespace's owner: %w", errno), restore()
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(r.HostID), ^uintptr(0)); errno != 0 {
		return nil, fmt.Errorf("become the namespace's owner: %w", errno), restore()
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(r.HostID), Size: int(r.Size)}}
	p, err := os.StartProcess("/proc/self/exe", []string{"sbx-userns"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: m,
		GidMappings: m,
		// Processes in the sandbox set their supplementary groups (the
		// executor runs commands as users): setgroups stays allowed.
		GidMappingsEnableSetgroups: true,
		Ptrace:                     true, // stops at exec: nothing of it runs
		// Killed with this thread if sbx dies before it kills the child
		// (a stopped tracee would otherwise outlive it, orphaned).
		Pdeathsig: syscall.SIGKILL,
	}})
	restored = restore()
	if err != nil {
		return nil, fmt.Errorf("make a user namespace for host ids %d-%d: %w", r.HostID, r.HostID+r.Size-1, err), restored
	}
	f, err = os.Open("/proc/" + strconv.Itoa(p.Pid) + "/ns/user")
	_ = p.Kill()
	_, _ = p.Wait()
	if err != nil {
		return nil, fmt.Errorf("open the new user namespace: %w", err), restored
	}
	return f, nil, restored
}

// Path names the namespace f for other processes while this one runs, for
// runtimes that join a namespace by path.
func Path(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}

// secbitNoSetuidFixup is SECBIT_NO_SETUID_FIXUP (linux/securebits.h): a
// change of the thread's uids keeps its capabilities.
const secbitNoSetuidFixup = 1 << 2
