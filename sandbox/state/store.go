// Package state keeps the on-disk state of sandboxes: one directory per
// sandbox holding its record and a lock file, a directory of names, and an
// index of expiry times. Every process that manages sandboxes (CLI
// invocations, a server) shares it; flock(2) on each sandbox's lock file
// serialises changes, and records are replaced atomically, so readers never
// need a lock and never see a half-written record.
//
// Layout under the persistent root:
//
//	sandboxes/<id>/record.json   the record (any JSON the caller chooses)
//	sandboxes/<id>/lock          flock target; held by whoever changes <id>
//	names/<name>                 contains the id owning name (O_EXCL claim)
//	expiry/<unix-nanos>.<id>     one empty file per sandbox with a deadline
//	admission.lock               held briefly while admitting a new sandbox
//
// and under the runtime root (normally on tmpfs, gone after a reboot):
//
//	sandboxes/<id>/              mounts, sockets and runtime state
package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/internal/fullfs"
	"github.com/sbxrun/sbx/internal/swapfile"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/errkind"
)

// Errors reported by the store. Test for them with errors.Is.
var (
	// ErrNotFound means no sandbox has the given id or name.
	ErrNotFound = errkind.New("no such sandbox", sbx.ErrNotFound)
	// ErrExists means a sandbox with that id already exists.
	ErrExists = errors.New("sandbox already exists")
	// ErrNameInUse means another sandbox already has that name.
	ErrNameInUse = sbx.ErrNameInUse
	// ErrLocked means another process holds the sandbox's lock.
	ErrLocked = sbx.ErrBusy
	// ErrNoRecord means the sandbox directory exists but holds no record:
	// its creator died before writing it (a live creator holds the lock).
	ErrNoRecord = errors.New("sandbox has no record")
	// ErrCorruptRecord means the sandbox's record exists but cannot be
	// decoded (truncated, garbage). sbx never writes one (records are
	// replaced atomically), so something else damaged it; what the record
	// described may still run.
	ErrCorruptRecord = errors.New("sandbox record is unreadable")
)

const (
	recordFile    = "record.json"
	spareFile     = "record.json.spare" // + "." + index: PrepareWrites
	spareName     = "name.spare"        // PrepareWrites
	lockFile      = "lock"
	sandboxesDir  = "sandboxes"
	namesDir      = "names"
	expiryDir     = "expiry"
	admissionLock = "admission.lock"
)

// Store is the on-disk state of all sandboxes. It is safe for concurrent
// use by goroutines and by processes.
type Store struct {
	root    string
	runRoot string
}

// Open returns the store under root (persistent) and runRoot (runtime),
// creating its directories if needed.
func Open(root, runRoot string) (*Store, error) {
	if root == "" || runRoot == "" {
		return nil, errors.New("state: root and run root must be set")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("state: root %q: %w", root, err)
	}
	runRoot, err = filepath.Abs(runRoot)
	if err != nil {
		return nil, fmt.Errorf("state: run root %q: %w", runRoot, err)
	}
	for _, d := range []string{
		filepath.Join(root, sandboxesDir),
		filepath.Join(root, namesDir),
		filepath.Join(root, expiryDir),
		filepath.Join(runRoot, sandboxesDir),
	} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state: create %s: %w (is --root writable? sbx needs root)", d, err)
		}
	}
	return &Store{root: root, runRoot: runRoot}, nil
}

// Root is the persistent root directory.
func (s *Store) Root() string { return s.root }

// RunRoot is the runtime root directory.
func (s *Store) RunRoot() string { return s.runRoot }

// SandboxesDir is the directory holding one directory per sandbox (and
// the hidden entries of creates and removes under way).
func (s *Store) SandboxesDir() string { return filepath.Join(s.root, sandboxesDir) }

// Dir is the persistent directory of sandbox id.
func (s *Store) Dir(id string) string { return filepath.Join(s.root, sandboxesDir, id) }

// RunDir is the runtime directory of sandbox id. The store does not create
// it; the caller records it as a resource first.
func (s *Store) RunDir(id string) string { return filepath.Join(s.runRoot, sandboxesDir, id) }

// RunDirs lists the names of the runtime directories that exist, for
// finding those whose record is gone.
func (s *Store) RunDirs() ([]string, error) {
	return readNames(filepath.Join(s.runRoot, sandboxesDir))
}

// Lock is a held exclusive lock on one sandbox. Only the holder may write
// the record or remove the sandbox.
type Lock struct {
	s  *Store
	id string
	f  *os.File
}

// ID is the id of the locked sandbox.
func (l *Lock) ID() string { return l.id }

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
}

// Create makes the directory of a new sandbox and returns it locked. The
// caller writes the first record with Lock.Write. It fails with ErrExists
// if id is taken.
//
// The directory is built under a hidden name that says which process is
// building it, locked there, and only then renamed into place: GC never
// sees a sandbox directory whose lock is free while its creator lives.
func (s *Store) Create(id string) (*Lock, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	dir := s.Dir(id)
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, ErrExists)
	}
	stage := filepath.Join(s.root, sandboxesDir, hiddenName(creatingPrefix, id))
	if err := os.Mkdir(stage, 0o700); err != nil {
		return nil, fmt.Errorf("state: create %s: %w%s", stage, bare(err), hint(err))
	}
	f, err := os.OpenFile(filepath.Join(stage, lockFile), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		_ = os.RemoveAll(stage)
		return nil, fmt.Errorf("state: create lock of %s: %w", id, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		_ = os.RemoveAll(stage)
		return nil, fmt.Errorf("state: lock new sandbox %s: %w", id, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, stage, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE); err != nil {
		_ = f.Close()
		_ = os.RemoveAll(stage)
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			return nil, fmt.Errorf("sandbox %s: %w", id, ErrExists)
		}
		return nil, fmt.Errorf("state: create %s: %w%s", dir, bare(err), hint(err))
	}
	return &Lock{s: s, id: id, f: f}, nil
}

// Hidden entries of the sandboxes directory: a sandbox being created or
// removed, named "<prefix><id>.<pid>.<start>" after the process doing it,
// so that RemoveAbandoned removes only those of dead processes.
const (
	creatingPrefix = ".creating."
	removingPrefix = ".removing."
)

func hiddenName(prefix, id string) string {
	start, _ := ProcessStart(os.Getpid())
	return fmt.Sprintf("%s%s.%d.%d", prefix, id, os.Getpid(), start)
}

// RemoveAbandoned removes what creates and removes that died midway left
// in the sandboxes directory (their hidden directories); those of live
// processes stay. It returns the ids it cleaned up.
func (s *Store) RemoveAbandoned() ([]string, error) {
	names, err := readNames(filepath.Join(s.root, sandboxesDir))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		var rest string
		switch {
		case strings.HasPrefix(n, creatingPrefix):
			rest = n[len(creatingPrefix):]
		case strings.HasPrefix(n, removingPrefix):
			rest = n[len(removingPrefix):]
		default:
			continue
		}
		f := strings.Split(rest, ".")
		if len(f) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(f[1])
		start, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if cur, ok := ProcessStart(pid); ok && cur == start {
			continue // its process is still at work
		}
		if err := os.RemoveAll(filepath.Join(s.root, sandboxesDir, n)); err != nil {
			errs = append(errs, fmt.Errorf("state: remove abandoned %s: %w", n, err))
			continue
		}
		removed = append(removed, f[0])
	}
	return removed, errors.Join(errs...)
}

// ProcessStart returns the start time (in clock ticks after boot, field 22
// of /proc/PID/stat) of a live process; ok is false when no such process
// runs or it is a zombie. With the PID it names one process across PID
// reuse.
func ProcessStart(pid int) (start uint64, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	// Read with plain system calls into a buffer on the stack: an
	// os.File would stat the file and offer it to the runtime's poller
	// first, and the fields would be copied out as strings. A claim of a
	// pool member reads it on its path.
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	var buf [1024]byte // field 22 ends within 600 bytes (a name of at most 64 bytes, numbers of at most 20 digits)
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	return parseProcessStart(buf[:n])
}

// parseProcessStart reads the start time (field 22) of a live process
// from its /proc/PID/stat line: false for a zombie or a line it cannot
// read.
func parseProcessStart(line []byte) (uint64, bool) {
	// The command name may hold spaces and parentheses: the fields
	// after it start after the last ')'.
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(line[i+1:])
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false // f[0] is field 3 (state), f[19] field 22
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

// Lock waits for the exclusive lock of sandbox id, or until ctx is done.
// It fails with ErrNotFound if the sandbox does not exist or is removed
// while waiting.
func (s *Store) Lock(ctx context.Context, id string) (*Lock, error) {
	return s.lock(ctx, id, true)
}

// TryLock takes the lock of sandbox id only if it is free; otherwise it
// fails with ErrLocked at once.
func (s *Store) TryLock(id string) (*Lock, error) {
	return s.lock(context.Background(), id, false)
}

func (s *Store) lock(ctx context.Context, id string, wait bool) (*Lock, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	path := filepath.Join(s.Dir(id), lockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, serr := os.Stat(s.Dir(id)); serr == nil {
					// The directory exists without a lock file: a creator
					// died between mkdir and creating the lock. Create the
					// lock so GC can take over.
					f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
				}
				if err != nil {
					return nil, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
				}
			} else {
				return nil, fmt.Errorf("state: open lock of %s: %w", id, err)
			}
		}
		if err := flock(ctx, f, wait); err != nil {
			_ = f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("sandbox %s: %w", id, ErrLocked)
			}
			return nil, fmt.Errorf("state: lock %s: %w", id, err)
		}
		// The holder before us may have removed the sandbox (and a new one
		// may even have reused the path): the lock only counts if the file
		// we locked is still the one at the path.
		same, err := sameFile(f, path)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		if same {
			return &Lock{s: s, id: id, f: f}, nil
		}
		_ = f.Close()
		if _, err := os.Stat(s.Dir(id)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
		}
	}
}

// flock takes an exclusive flock on f. Waiting happens in the kernel; when
// ctx ends first the waiter is abandoned and closes its descriptor once the
// lock arrives (closing releases it).
func flock(ctx context.Context, f *os.File, wait bool) error {
	if !wait {
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil || !errors.Is(err, unix.EWOULDBLOCK) {
		return err
	}
	if ctx.Done() == nil {
		return retryEINTR(func() error { return unix.Flock(int(f.Fd()), unix.LOCK_EX) })
	}
	// Waiting on a duplicate lets us give up on ctx by closing our own
	// descriptor while the kernel wait finishes in the background.
	dup, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		err := retryEINTR(func() error { return unix.Flock(dup, unix.LOCK_EX) })
		done <- err
	}()
	select {
	case err := <-done:
		_ = unix.Close(dup)
		return err
	case <-ctx.Done():
		go func() {
			<-done
			// Both descriptors share one open file description: unlock
			// explicitly so the caller's close is not needed for release.
			_ = unix.Flock(dup, unix.LOCK_UN)
			_ = unix.Close(dup)
		}()
		return fmt.Errorf("waiting for the sandbox lock: %w", ctx.Err())
	}
}

func retryEINTR(fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("state: stat lock: %w", err)
	}
	pi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state: stat lock: %w", err)
	}
	return os.SameFile(fi, pi), nil
}

// Write replaces the record of the locked sandbox atomically: readers see
// either the old or the new record, also if the process dies midway.
func (l *Lock) Write(v any) error {
	if l.f == nil {
		return errors.New("state: write through a released lock")
	}
	data, err := encodeRecord(v)
	if err != nil {
		return fmt.Errorf("state: encode record of %s: %w", l.id, err)
	}
	path := filepath.Join(l.s.Dir(l.id), recordFile)
	spares := false
	for i := range maxSpares {
		ok, exists := writeSpare(filepath.Join(l.s.Dir(l.id), spareFile+"."+strconv.Itoa(i)), path, data)
		if ok {
			return nil
		}
		spares = spares || exists
	}
	if err := writeAtomic(path, data); err != nil {
		return err
	}
	if spares {
		// All used (a claim's two writes are done) or left written by a
		// crash: of no more use.
		l.s.DropSpares(l.id)
	}
	return nil
}

// DropSpares removes the spare files PrepareWrites made for sandbox id,
// used or not: those of a claimed pool member, whose used spares hold the
// records its claim replaced. A claim leaves them (a removal costs a disk
// file system's journal 0.3 ms and more on a busy host); the next write
// of the record that finds no spare to fill removes them, and so does a
// server's watcher, off the claim's path. It needs no lock: a write or
// name claim whose spare goes meanwhile makes a new file instead.
func (s *Store) DropSpares(id string) {
	if ValidID(id) != nil {
		return
	}
	dir := s.Dir(id)
	_ = os.Remove(filepath.Join(dir, spareName))
	for i := range maxSpares {
		_ = os.Remove(filepath.Join(dir, spareFile+"."+strconv.Itoa(i)))
	}
}

// encodeRecord is json.Marshal(v), but a v with a MarshalJSON method of
// its own (such as a non-nil *sbx.Sandbox) is encoded by that method
// alone: json.Marshal would scan its output again to compact and check
// it, which takes twice as long as the encoding itself (a record of 2 KB:
// 70 µs against 24), twice on the path of a pool member's claim. The
// method's output comes from json.Marshal: compact and valid.
func encodeRecord(v any) ([]byte, error) {
	if m, ok := v.(json.Marshaler); ok {
		if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || !rv.IsNil() {
			return m.MarshalJSON()
		}
	}
	return json.Marshal(v)
}

// maxSpares is how many record writes PrepareWrites prepares at most.
const maxSpares = 2

// PrepareWrites makes, for the next writes of the locked sandbox's record
// (at most two) and the next name it claims (ClaimName), empty files in
// its directory that those writes fill instead of making new ones. A new
// file costs a disk file system (ext4) an inode and its journal: 0.2 to
// 0.3 ms on a busy host, against about 0.01 ms to fill one made before. A
// pool member's filler makes them, untimed, for its claim's writes. What
// a crash leaves in them is never read (a write only takes an empty one),
// and they go at the first write that finds none to fill (DropSpares).
func (l *Lock) PrepareWrites() error {
	if l.f == nil {
		return errors.New("state: prepare writes through a released lock")
	}
	dir := l.s.Dir(l.id)
	names := []string{spareName}
	for i := range maxSpares {
		names = append(names, spareFile+"."+strconv.Itoa(i))
	}
	for _, name := range names {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return fmt.Errorf("state: prepare the record writes of %s: %w%s", l.id, bare(err), hint(err))
		}
		f.Close()
	}
	return nil
}

// writeSpare writes data into the empty file spare (PrepareWrites') and
// swaps it with path. It reports false, having changed nothing that
// readers see, when there is no such spare (exists false) or it cannot be
// used. The old record, now at the spare's path, is left there, as is a
// spare a crash left written: neither is ever read (a write takes only an
// empty spare), and a later write or the watcher removes them
// (DropSpares). Removing a file with data costs a disk file system (ext4)
// a journal update that takes 0.3 ms and more on a busy host, on the path
// of a pool member's claim.
func writeSpare(spare, path string, data []byte) (ok, exists bool) {
	if ok, exists = fillSpare(spare, data); !ok {
		return false, exists
	}
	return unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE) == nil, true
}

// writeAtomic writes data to a temporary file next to path and swaps it
// with path. The data is not fsynced: records only need to survive the
// death of a process; after a host crash the runtime state they describe
// is gone too, and GC treats unreadable records as stale.
//
// The swap (swapfile.Replace) is what a rename over path would do for
// readers, minus the stall of ext4's flush of a file renamed over another.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp." + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		// A full disk: the record's own blocks still take a record
		// (stopped, removing), so that sbx tells the truth and can
		// free space.
		if fullfs.IsFull(err) && fullfs.Overwrite(path, data) == nil {
			return nil
		}
		return fmt.Errorf("state: write %s: %w%s", path, bare(err), hint(err))
	}
	if err := swapfile.Replace(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("state: replace %s: %w%s", path, bare(err), hint(err))
	}
	return nil
}

// bare strips the path from an *os.PathError or *os.LinkError (the caller
// names the file once), keeping the errno for errors.Is.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// hint says what to do about the errors a user can fix.
func hint(err error) string {
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return " (free space on that file system and try again)"
	case errors.Is(err, unix.EROFS):
		return " (the file system is read-only)"
	}
	return ""
}

// Read decodes the record of sandbox id into v without locking. It fails
// with ErrNotFound if the sandbox does not exist, with ErrNoRecord if its
// directory exists without a record and with ErrCorruptRecord if the
// record cannot be decoded.
func (s *Store) Read(id string, v any) error {
	if err := ValidID(id); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(id), recordFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(s.Dir(id)); serr == nil {
				return fmt.Errorf("sandbox %s: %w", id, ErrNoRecord)
			}
			return fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
		}
		return fmt.Errorf("state: read record of %s: %w", id, err)
	}
	if len(data) == 0 {
		return fmt.Errorf("sandbox %s: %w: record.json is empty", id, ErrCorruptRecord)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("sandbox %s: %w: %v", id, ErrCorruptRecord, err)
	}
	return nil
}

// Read decodes the locked sandbox's record into v.
func (l *Lock) Read(v any) error { return l.s.Read(l.id, v) }

// Remove deletes the locked sandbox's persistent directory and releases
// the lock. Waiters then find the sandbox gone. The runtime directory and
// the sandbox's name and expiry entries are the caller's to remove first.
//
// The directory first leaves its place in one rename (to a hidden name
// that says which process removes it), so that nobody, GC included, can
// lock or refill it while it is being deleted.
func (l *Lock) Remove() error {
	if l.f == nil {
		return errors.New("state: remove through a released lock")
	}
	dir := l.s.Dir(l.id)
	gone := filepath.Join(l.s.root, sandboxesDir, hiddenName(removingPrefix, l.id))
	if err := os.Rename(dir, gone); err != nil {
		return fmt.Errorf("state: remove %s: %w%s", dir, bare(err), hint(err))
	}
	err := os.RemoveAll(gone)
	l.Unlock()
	if err != nil {
		return fmt.Errorf("state: remove %s: %w%s", gone, bare(err), hint(err))
	}
	return nil
}

// IDs lists the ids of all sandboxes, sorted. It reads one directory and
// no records.
func (s *Store) IDs() ([]string, error) {
	names, err := readNames(filepath.Join(s.root, sandboxesDir))
	if err != nil {
		return nil, err
	}
	ids := names[:0]
	for _, n := range names {
		if ValidID(n) == nil {
			ids = append(ids, n)
		}
	}
	return ids, nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("state: list %s: %w%s", dir, bare(err), hint(err))
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("state: list %s: %w%s", dir, bare(err), hint(err))
	}
	sort.Strings(names)
	return names, nil
}

// Entry is one sandbox found by ReadAll: its record, or why it could not be
// read (ErrNoRecord for a creator that died before the first write,
// ErrCorruptRecord for a damaged record, ErrNotFound for one removed while
// listing).
type Entry[T any] struct {
	ID     string
	Record T
	Err    error
}

// ReadAll reads the records of all sandboxes in parallel, in id order.
func ReadAll[T any](s *Store) ([]Entry[T], error) {
	ids, err := s.IDs()
	if err != nil {
		return nil, err
	}
	out := make([]Entry[T], len(ids))
	workers := min(runtime.GOMAXPROCS(0)*2, len(ids))
	var wg sync.WaitGroup
	next := make(chan int, len(ids))
	for i := range ids {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i].ID = ids[i]
				out[i].Err = s.Read(ids[i], &out[i].Record)
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// ClaimName reserves name for sandbox id. It fails with ErrNameInUse if
// another sandbox holds it. Claiming a name id already holds succeeds.
// With a spare file of the sandbox's (PrepareWrites), the name is that
// file, filled and renamed into place unless the name exists.
func (s *Store) ClaimName(name, id string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	path := filepath.Join(s.root, namesDir, name)
	if ValidID(id) == nil && s.claimNameWithSpare(path, id) {
		return nil
	}
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.WriteString(id)
			cerr := f.Close()
			if werr != nil || cerr != nil {
				_ = os.Remove(path)
				return fmt.Errorf("state: claim name %q: %w", name, errors.Join(werr, cerr))
			}
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("state: claim name %q: %w", name, err)
		}
		owner, err := s.nameOwner(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return err
		}
		if owner == id {
			return nil
		}
		// A name whose owner is gone is stale (its remover died): take it.
		if _, err := os.Stat(s.Dir(owner)); errors.Is(err, fs.ErrNotExist) && owner != "" {
			if s.releaseNameIf(name, owner) {
				continue
			}
		}
		return fmt.Errorf("name %q is used by sandbox %s: %w", name, short(owner), ErrNameInUse)
	}
}

// fillSpare writes data into the spare file at path (PrepareWrites'):
// ok if it was an empty regular file and now holds data; exists is false
// when there is no such file.
func fillSpare(path string, data []byte) (ok, exists bool) {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, false
	}
	fi, err := f.Stat()
	ok = err == nil && fi.Mode().IsRegular() && fi.Size() == 0
	if ok {
		_, err = f.Write(data)
		ok = err == nil
	}
	if err := f.Close(); err != nil {
		ok = false
	}
	return ok, true
}

// claimNameWithSpare claims the name at path for id with the sandbox's
// spare name file, if it has an empty one: it reports false (the spare
// removed if it was not empty) when it has none or the name exists.
func (s *Store) claimNameWithSpare(path, id string) bool {
	spare := filepath.Join(s.Dir(id), spareName)
	ok, exists := fillSpare(spare, []byte(id))
	if !exists {
		return false
	}
	if !ok {
		_ = os.Remove(spare)
		return false
	}
	if unix.Renameat2(unix.AT_FDCWD, spare, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE) != nil {
		// Taken (ClaimName's loop says by whom), or no such rename here:
		// the spare, written, is of no more use.
		_ = os.Remove(spare)
		return false
	}
	return true
}

// ReleaseName frees name if sandbox id holds it.
func (s *Store) ReleaseName(name, id string) {
	if ValidName(name) != nil {
		return
	}
	s.releaseNameIf(name, id)
}

func (s *Store) releaseNameIf(name, id string) bool {
	path := filepath.Join(s.root, namesDir, name)
	owner, err := s.nameOwner(name)
	if err != nil || owner != id {
		return false
	}
	return os.Remove(path) == nil
}

func (s *Store) nameOwner(name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(s.root, namesDir, name))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// LookupName returns the id of the sandbox called name.
func (s *Store) LookupName(name string) (string, error) {
	if ValidName(name) != nil {
		return "", fmt.Errorf("sandbox %q: %w", name, ErrNotFound)
	}
	id, err := s.nameOwner(name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && ValidID(id) != nil) {
		return "", fmt.Errorf("sandbox %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("state: look up name %q: %w", name, err)
	}
	return id, nil
}

// Names returns every claimed name and its owner, for GC.
func (s *Store) Names() (map[string]string, error) {
	names, err := readNames(filepath.Join(s.root, namesDir))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		if owner, err := s.nameOwner(n); err == nil {
			out[n] = owner
		}
	}
	return out, nil
}

// SetExpiry records that sandbox id expires at t, replacing any earlier
// deadline. A zero t removes the deadline.
func (s *Store) SetExpiry(id string, t time.Time) error {
	if err := ValidID(id); err != nil {
		return err
	}
	s.ClearExpiry(id)
	if t.IsZero() {
		return nil
	}
	path := filepath.Join(s.root, expiryDir, fmt.Sprintf("%020d.%s", t.UnixNano(), id))
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return fmt.Errorf("state: record expiry of %s: %w", id, err)
	}
	return nil
}

// ClearExpiry removes the deadline of sandbox id, if any.
func (s *Store) ClearExpiry(id string) {
	matches, _ := filepath.Glob(filepath.Join(s.root, expiryDir, "*."+id))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// Expired lists the sandboxes whose deadline is at or before now, earliest
// first. It reads one small directory and no records, so every command can
// afford to call it.
func (s *Store) Expired(now time.Time) ([]string, error) {
	names, err := readNames(filepath.Join(s.root, expiryDir))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, n := range names { // sorted: zero-padded times order lexically
		ts, id, ok := strings.Cut(n, ".")
		if !ok || ValidID(id) != nil {
			continue
		}
		nanos, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		if nanos > now.UnixNano() {
			break
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// NextExpiry returns the earliest deadline of any sandbox, or the zero
// time when none has one.
func (s *Store) NextExpiry() (time.Time, error) {
	names, err := readNames(filepath.Join(s.root, expiryDir))
	if err != nil {
		return time.Time{}, err
	}
	for _, n := range names {
		ts, id, ok := strings.Cut(n, ".")
		if !ok || ValidID(id) != nil {
			continue
		}
		if nanos, err := strconv.ParseInt(ts, 10, 64); err == nil {
			return time.Unix(0, nanos), nil
		}
	}
	return time.Time{}, nil
}

// ExpiryDir is the directory of expiry entries, for watching it.
func (s *Store) ExpiryDir() string { return filepath.Join(s.root, expiryDir) }

// Admission holds the store-wide admission lock while a new sandbox is
// counted against the configured limits, so two processes cannot both
// take the last slot.
type Admission struct{ f *os.File }

// Admit waits for the admission lock.
func (s *Store) Admit(ctx context.Context) (*Admission, error) {
	f, err := os.OpenFile(filepath.Join(s.root, admissionLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: open admission lock: %w", err)
	}
	if err := flock(ctx, f, true); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("state: admission lock: %w", err)
	}
	return &Admission{f: f}, nil
}

// Release gives the admission lock back.
func (a *Admission) Release() {
	if a != nil && a.f != nil {
		_ = a.f.Close()
		a.f = nil
	}
}

// LockFile takes an exclusive flock on path (created if needed), waiting
// until ctx ends, and returns the function that releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: open lock %s: %w%s", path, bare(err), hint(err))
	}
	if err := flock(ctx, f, true); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("state: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// TryLockFile takes an exclusive flock on path (created if needed) only if
// it is free; otherwise it fails with ErrLocked.
func TryLockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: open lock %s: %w%s", path, bare(err), hint(err))
	}
	if err := flock(context.Background(), f, false); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("state: lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
