package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbxrun/sbx"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/sandbox/state"
)

// WatchExpiry removes sandboxes as their TTLs pass, sleeping in between
// until the next deadline or a change of the expiry index (inotify, no
// polling). It returns when ctx ends, or with untilIdle as soon as no
// sandbox has a deadline any more. The CLI runs it in a short-lived
// background process (`sbx expiry-watcher`) started by the first create
// with a TTL; a server runs it for its lifetime.
func (h *Host) WatchExpiry(ctx context.Context, untilIdle bool) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch expiry index: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, h.store.ExpiryDir(), unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM); err != nil {
		return fmt.Errorf("watch expiry index: %w", err)
	}
	buf := make([]byte, 64<<10)
	for {
		h.removeExpired(ctx)
		next, err := h.store.NextExpiry()
		if err != nil {
			return err
		}
		if next.IsZero() && untilIdle {
			return nil
		}
		wait := time.Hour
		if !next.IsZero() {
			// A little after the deadline, so that it has passed.
			wait = min(wait, time.Until(next)+time.Millisecond)
		}
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(d))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := waitReadable(ctx, fd, max(wait, 0)); err != nil {
			return err
		}
		for { // drain the events; the loop re-reads the index anyway
			if _, err := unix.Read(fd, buf); err != nil {
				break
			}
		}
	}
}

// waitReadable waits until fd is readable, d passes or ctx ends (checked
// at least every second).
func waitReadable(ctx context.Context, fd int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		ms := int(min(left, time.Second) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 1))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("watch expiry index: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// watcherLock is held by the process that runs RunExpiryWatcher.
const watcherLock = "expiry-watcher.lock"

// RunExpiryWatcher runs WatchExpiry until no sandbox has a deadline,
// unless another process already does (then it returns false at once). At
// most one watcher runs per root.
func (h *Host) RunExpiryWatcher(ctx context.Context) (bool, error) {
	path := filepath.Join(h.store.Root(), watcherLock)
	ran := false
	for {
		unlock, err := state.TryLockFile(path)
		if errors.Is(err, state.ErrLocked) {
			return ran, nil
		}
		if err != nil {
			return ran, err
		}
		ran = true
		err = h.WatchExpiry(ctx, true)
		unlock()
		if err != nil {
			return ran, err
		}
		// A create may have added a deadline after the last look but
		// before the lock was released, and seen the lock held: look again.
		if next, err := h.store.NextExpiry(); err != nil || next.IsZero() {
			return ran, err
		}
	}
}

// ExpiryWatcherRunning reports whether a process runs RunExpiryWatcher.
func (h *Host) ExpiryWatcherRunning() bool {
	unlock, err := state.TryLockFile(filepath.Join(h.store.Root(), watcherLock))
	if err != nil {
		return true
	}
	unlock()
	return false
}

// SpawnDetached starts argv in the background, in a session of its own
// with stdio on /dev/null, so that it outlives the caller and its
// terminal: how sbx starts the programs that finish its work after it
// exits (sbx expiry-watcher, which runs RunExpiryWatcher, and sbx
// auto-remove).
func SpawnDetached(argv []string) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	return cmd.Process.Release()
}

// removeExpired removes the sandboxes whose TTL has passed. Every operation
// calls it first; it reads one small directory when nothing has expired.
// Sandboxes busy with another operation are left for next time.
func (h *Host) removeExpired(ctx context.Context) []string {
	ids, err := h.store.Expired(h.now())
	if err != nil {
		h.log.Warn("read sandbox expiry index", "err", err)
		return nil
	}
	var reaped []string
	for _, id := range ids {
		l, err := h.store.TryLock(id)
		if errors.Is(err, state.ErrNotFound) {
			h.store.ClearExpiry(id)
			continue
		}
		if err != nil {
			continue // busy: a create in progress or another remover
		}
		var sb sbx.Sandbox
		if err := l.Read(&sb); err != nil || sb.ExpiresAt == nil || sb.ExpiresAt.After(h.now()) {
			l.Unlock()
			continue
		}
		h.emit(changeExpired, &sb)
		if err := h.destroy(context.WithoutCancel(ctx), l, &sb); err != nil {
			h.log.Warn("remove expired sandbox", "id", id, "err", err)
			l.Unlock()
			continue
		}
		h.log.Info("removed expired sandbox", "id", id)
		reaped = append(reaped, id)
	}
	return reaped
}

// Renew renews the owner lease of the sandbox ref (Options.Lease): it now
// expires Lease from now, never after the end of its TTL. A sandbox
// created without a lease is sbx.ErrState; one whose lease has already
// run out is being removed (sbx.ErrNotFound).
func (h *Host) Renew(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if sb.Options.Lease <= 0 {
		return nil, fmt.Errorf("%w: sandbox %s has no lease to renew (create it with a lease)", sbx.ErrState, sb.ShortID())
	}
	if h.expired(sb) {
		return nil, fmt.Errorf("sandbox %s: its lease ran out: %w", sb.ShortID(), sbx.ErrNotFound)
	}
	switch sb.Status {
	case sbx.StatusRemoving, sbx.StatusUnreadable:
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	exp := sb.Options.ExpiryAt(sb.Created, h.now().UTC())
	// The index first: a deadline there that the record does not have yet
	// is only looked at early; one the record has and the index lacks
	// would never be.
	if err := h.store.SetExpiry(sb.ID, exp); err != nil {
		return nil, err
	}
	old := sb.ExpiresAt
	sb.ExpiresAt = &exp
	if err := l.Write(sb); err != nil {
		if old != nil {
			_ = h.store.SetExpiry(sb.ID, *old)
		}
		return nil, fmt.Errorf("renew the lease of sandbox %s: %w", sb.ShortID(), err)
	}
	return sb, nil
}
