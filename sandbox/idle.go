package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// The idle policy (Options.IdleTimeout): a sandbox nobody has used for
// that long is checkpointed to disk (as stop --checkpoint does) and its
// container released, which frees its processes' memory and its cgroups;
// the next call that needs its executor restores it first.
//
// Use is recorded in the sandbox's runtime directory, so that every
// process managing the root (CLI and server) sees it: the mtime of the
// file activityFile is the last use, and a call in progress holds a shared
// flock on it. The idle check takes the exclusive lock without waiting (a
// call in progress: busy) and holds it through the checkpoint, so a call
// that starts meanwhile waits for the checkpoint and then restores.

const (
	// activityFile in a sandbox's runtime directory: its mtime is the
	// sandbox's last use, its flock says a call is in progress.
	activityFile = "activity"
	// idlePoll is how often the idle check runs.
	idlePoll = time.Second
	// activityTouchEvery throttles the mtime updates of a connection's
	// traffic.
	activityTouchEvery = time.Second
	// idleLockWait bounds how long a call waits for an idle checkpoint in
	// progress.
	idleLockWait = 5 * time.Minute
)

// checkIdleOptions refuses an idle timeout for a sandbox that cannot be
// checkpointed, or on a host without a usable CRIU.
func (h *Host) checkIdleOptions(o *sbx.Options) error {
	if o.IdleTimeout == 0 {
		return nil
	}
	probe := &sbx.Sandbox{Options: *o}
	if o.Image != "" {
		probe.Image = &sbx.ImageInfo{}
	}
	if err := checkpointable(probe); err != nil {
		return fmt.Errorf("idle_timeout: %w", err)
	}
	if _, err := h.criu(); err != nil {
		return fmt.Errorf("idle_timeout checkpoints the sandbox: %w", err)
	}
	return nil
}

// use returns the record of a sandbox whose executor can answer, as
// running does, for a call that uses it: a sandbox checkpointed by its
// idle timeout is restored first. The call is recorded as activity until
// done is called (done is never nil).
func (h *Host) use(ctx context.Context, ref string) (sb *sbx.Sandbox, done func(), err error) {
	sb, err = h.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if sb.Options.IdleTimeout == 0 {
		sb, err = h.running(ctx, sb.ID)
		return sb, func() {}, err
	}
	f, err := h.holdActivity(ctx, sb.ID)
	if err != nil {
		return nil, nil, err
	}
	done = func() {
		touchActivity(f)
		f.Close() // releases the flock
	}
	if sb, err = h.Get(ctx, sb.ID); err == nil && sb.Status == sbx.StatusStopped && sb.Idle {
		h.log.Info("restore idle sandbox", "id", sb.ID)
		_, err = h.Start(ctx, sb.ID)
	}
	if err == nil {
		sb, err = h.running(ctx, sb.ID)
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	touchActivity(f)
	return sb, done, nil
}

// holdActivity opens the activity file of sandbox id with a shared flock,
// waiting (bounded by ctx and idleLockWait) while an idle checkpoint holds
// it exclusively.
func (h *Host) holdActivity(ctx context.Context, id string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(h.store.RunDir(id), activityFile), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("record the use of sandbox %s: %w", id, err)
	}
	deadline := time.Now().Add(idleLockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("record the use of sandbox %s: %w", id, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: sandbox %s: its idle checkpoint has not ended after %s; look at the server's log", sbx.ErrState, id, idleLockWait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// touchActivity records a use now (the file's mtime).
func touchActivity(f *os.File) {
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now)
}

// activityConn is a connection to a sandbox with an idle timeout (Dial,
// DialPort): its traffic is use.
type activityConn struct {
	net.Conn
	path string
	last atomic.Int64 // unix nanos of the last mtime update
}

func newActivityConn(c net.Conn, run string) *activityConn {
	ac := &activityConn{Conn: c, path: filepath.Join(run, activityFile)}
	ac.last.Store(time.Now().UnixNano())
	return ac
}

// touch records traffic as use, at most every activityTouchEvery. A
// close is not use: a connection pool closes idle connections late.
func (c *activityConn) touch() {
	now := time.Now()
	last := c.last.Load()
	if now.UnixNano()-last >= int64(activityTouchEvery) && c.last.CompareAndSwap(last, now.UnixNano()) {
		_ = os.Chtimes(c.path, now, now)
	}
}

func (c *activityConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *activityConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// CloseWrite half-closes the connection when the underlying one can.
func (c *activityConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("connection cannot half-close")
}

// checkpointIdle checkpoints every running sandbox whose idle timeout has
// passed since its last use, and returns their ids. Busy ones (a call in
// progress, another operation holding the sandbox) are left for the next
// round; one whose checkpoint fails runs on, and is tried again after
// another idle timeout. It reports whether any sandbox has an idle
// timeout (running or checkpointed), for a watcher that ends when none
// does.
func (h *Host) checkpointIdle(ctx context.Context) (done []string, watched bool) {
	list, err := h.list(ctx, sbx.Filter{}, false)
	if err != nil {
		// A watcher ends (the next create with an idle timeout starts one
		// again); a server's tries again.
		h.log.Warn("idle check: list sandboxes", "err", err)
		return nil, false
	}
	for _, sb := range list {
		if sb.Options.IdleTimeout == 0 {
			continue
		}
		if sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusCreating || (sb.Status == sbx.StatusStopped && sb.Idle) {
			watched = true
		}
		if sb.Status != sbx.StatusRunning || time.Since(h.lastActive(sb)) < sb.Options.IdleTimeout {
			continue
		}
		if err := h.checkpointIdleOne(ctx, sb); err != nil {
			h.log.Warn("idle checkpoint failed; the sandbox runs on", "id", sb.ID, "err", err)
			continue
		}
		done = append(done, sb.ID)
	}
	return done, watched
}

// lastActive is the last use of sb: its activity file's mtime or its
// (re)start, whichever is later.
func (h *Host) lastActive(sb *sbx.Sandbox) time.Time {
	last := sb.Created
	if sb.Started != nil {
		last = *sb.Started
	}
	if fi, err := os.Stat(filepath.Join(h.store.RunDir(sb.ID), activityFile)); err == nil && fi.ModTime().After(last) {
		last = fi.ModTime()
	}
	return last
}

// checkpointIdleOne checkpoints sandbox id for idleness, unless it is busy
// or was used meanwhile. On a failed checkpoint its use is recorded now,
// so that the next try waits another idle timeout.
func (h *Host) checkpointIdleOne(ctx context.Context, listed *sbx.Sandbox) error {
	id := listed.ID
	path := filepath.Join(h.store.RunDir(id), activityFile)
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		// Never used: idle since its start, which the new file says.
		last := h.lastActive(listed)
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600); err == nil {
			_ = os.Chtimes(path, last, last)
		}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // a call in progress
	}
	l, err := h.store.TryLock(id)
	if errors.Is(err, state.ErrLocked) {
		return nil // another operation; next round
	}
	if err != nil {
		return err
	}
	defer l.Unlock()
	var sb sbx.Sandbox
	if err := l.Read(&sb); err != nil {
		return err
	}
	h.refresh(l, &sb)
	if sb.Status != sbx.StatusRunning || sb.Options.IdleTimeout == 0 || time.Since(h.lastActive(&sb)) < sb.Options.IdleTimeout {
		return nil
	}
	if _, err := h.stopCheckpoint(ctx, l, &sb, true); err != nil {
		touchActivity(f)
		return err
	}
	// The processes are gone; their container's state and cgroups go too
	// (Start makes them again).
	if err := releaseContainer(ctx, h.containerRoot(), id); err != nil {
		h.log.Warn("idle checkpoint: release the container", "id", id, "err", err)
	}
	h.log.Info("checkpointed idle sandbox", "id", id, "snapshot", sb.Checkpoint)
	return nil
}

// WatchIdle runs the idle check every second until ctx ends, or with
// untilNone as soon as no sandbox has an idle timeout. The CLI runs it in
// a background process (`sbx idle-watcher`) started by a create with an
// idle timeout; a server runs it for its lifetime.
func (h *Host) WatchIdle(ctx context.Context, untilNone bool) error {
	for {
		_, watched := h.checkpointIdle(ctx)
		if !watched && untilNone {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(idlePoll):
		}
	}
}

// idleWatcherLock is held by the process that runs RunIdleWatcher.
const idleWatcherLock = "idle-watcher.lock"

// RunIdleWatcher runs WatchIdle until no sandbox has an idle timeout,
// unless another process already does (then it returns false at once).
// At most one runs per root.
func (h *Host) RunIdleWatcher(ctx context.Context) (bool, error) {
	path := filepath.Join(h.store.Root(), idleWatcherLock)
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
		err = h.WatchIdle(ctx, true)
		unlock()
		if err != nil {
			return ran, err
		}
		// A create may have come after the last look but seen the lock
		// held: look again.
		if _, watched := h.checkpointIdle(ctx); !watched {
			return ran, nil
		}
	}
}

// IdleWatcherRunning reports whether a process runs RunIdleWatcher.
func (h *Host) IdleWatcherRunning() bool {
	unlock, err := state.TryLockFile(filepath.Join(h.store.Root(), idleWatcherLock))
	if err != nil {
		return true
	}
	unlock()
	return false
}

// dropStopCheckpoint removes the snapshot a stop --checkpoint (or the idle
// timeout) made of sb, which is being removed; a snapshot made by an
// explicit checkpoint under its own name stays.
func (h *Host) dropStopCheckpoint(ctx context.Context, sb *sbx.Sandbox) error {
	if sb.Checkpoint == "" || !h.hasSnapshot(sb.Checkpoint) {
		return nil
	}
	var ri restoreInfo
	if err := readJSONFile(filepath.Join(h.snapshotDir(sb.Checkpoint), restoreFile), &ri); err != nil || !ri.Stop {
		return nil
	}
	if err := h.RemoveSnapshot(ctx, sb.Checkpoint); err != nil && !errors.Is(err, sbx.ErrNoSuchFile) {
		return fmt.Errorf("remove the checkpoint %s of sandbox %s: %w", sb.Checkpoint, sb.ShortID(), err)
	}
	return nil
}

// RunWatchers runs RunExpiryWatcher and RunIdleWatcher side by side until
// both have returned: the CLI's background process after a create with a
// TTL or an idle timeout.
func (h *Host) RunWatchers(ctx context.Context) error {
	idle := make(chan error, 1)
	go func() {
		_, err := h.RunIdleWatcher(ctx)
		idle <- err
	}()
	_, err := h.RunExpiryWatcher(ctx)
	return errors.Join(err, <-idle)
}
