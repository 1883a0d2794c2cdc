package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox/state"
)

// DefaultStopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// container loads the libcontainer container of a sandbox.
func (m *Manager) container(sb *Sandbox) (*isolate.Container, error) {
	ctr, err := isolate.Load(m.containerRoot(), sb.ID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s has no container (run sbx gc if it crashed): %w", sb.ShortID(), err)
	}
	return ctr, nil
}

// refresh marks a running or paused sandbox stopped when its PID 1 is
// gone (it exited on its own, or the host restarted). Only a container
// that libcontainer reports stopped, or whose state no longer exists,
// counts; any other error leaves the record alone.
func (m *Manager) refresh(l *state.Lock, sb *Sandbox) {
	if sb.Status != StatusRunning && sb.Status != StatusPaused {
		return
	}
	ctr, err := m.container(sb)
	switch {
	case errors.Is(err, libcontainer.ErrNotExist):
	case err != nil:
		m.log.Warn("cannot tell whether the sandbox runs", "id", sb.ID, "err", err)
		return
	case ctr.Status() != "stopped":
		return
	}
	if err := m.markStopped(l, sb); err != nil {
		m.log.Warn("record stopped sandbox", "id", sb.ID, "err", err)
	}
}

// markStopped records that sb's PID 1 is gone. An error means the record
// still says what it said before (the next operation finds PID 1 gone
// and records it again).
func (m *Manager) markStopped(l *state.Lock, sb *Sandbox) error {
	now := m.now().UTC()
	prev := *sb
	sb.Status = StatusStopped
	sb.Stopped = &now
	sb.Pid, sb.PidStart = 0, 0
	if err := l.Write(sb); err != nil {
		*sb = prev
		return err
	}
	m.emit(EventStopped, sb)
	return nil
}

// Stop sends SIGTERM to the sandbox's PID 1, waits up to timeout (0 means
// DefaultStopTimeout) and then kills it. The root file system is kept
// until Remove; Start runs the sandbox again.
func (m *Manager) Stop(ctx context.Context, ref string, timeout time.Duration) (*Sandbox, error) {
	m.reapExpired(ctx)
	l, sb, err := m.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	m.refresh(l, sb)
	if sb.Status == StatusStopped {
		return sb, nil
	}
	if sb.Status != StatusRunning && sb.Status != StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	ctr, err := m.container(sb)
	if err != nil {
		return nil, err
	}
	if err := stopContainer(ctx, ctr, timeout); err != nil {
		return nil, err
	}
	if err := m.markStopped(l, sb); err != nil {
		return nil, fmt.Errorf("sandbox %s stopped, but its record could not say so: %w", sb.ShortID(), err)
	}
	return sb, nil
}

// stopContainer sends SIGTERM, waits up to timeout, then SIGKILL.
func stopContainer(ctx context.Context, ctr *isolate.Container, timeout time.Duration) error {
	pid := ctr.Pid()
	if pid <= 0 {
		return nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // already gone
	}
	defer unix.Close(pidfd)
	paused := ctr.Status() == "paused"
	if err := ctr.Signal(unix.SIGTERM); err != nil {
		return err
	}
	if paused {
		_ = ctr.Resume() // let it handle the signal
	}
	if waitPidfd(ctx, pidfd, timeout) == nil {
		return nil
	}
	if err := ctr.Kill(); err != nil {
		return err
	}
	return waitPidfd(ctx, pidfd, killWait)
}

// Start runs a stopped sandbox again on its kept root file system.
func (m *Manager) Start(ctx context.Context, ref string) (*Sandbox, error) {
	m.reapExpired(ctx)
	l, sb, err := m.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	m.refresh(l, sb)
	if sb.Status == StatusRunning {
		return sb, nil
	}
	if sb.Status != StatusStopped {
		return nil, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	if _, err := os.Stat(sb.RootPath); err != nil {
		return nil, fmt.Errorf("%w: the root file system of sandbox %s is gone (did the host restart?): remove it with sbx rm", ErrState, sb.ShortID())
	}
	// The old container's state and cgroups go first; the root stays.
	for _, r := range sb.Resources {
		if r.Kind == ResourceContainer {
			if err := m.releaseContainer(ctx, r); err != nil {
				return nil, err
			}
		}
	}
	hostname := sb.Options.Hostname
	if hostname == "" {
		hostname = sb.ShortID()
	}
	if err := m.startContainer(ctx, sb, hostname, nil); err != nil {
		_ = m.releaseContainer(context.WithoutCancel(ctx), Resource{Kind: ResourceContainer, Path: m.containerRoot(), ID: sb.ID})
		return nil, err
	}
	now := m.now().UTC()
	sb.Status, sb.Started, sb.Stopped = StatusRunning, &now, nil
	if err := l.Write(sb); err != nil {
		return nil, err
	}
	m.emit(EventStarted, sb)
	return sb, nil
}

// Pause freezes every process of the sandbox (cgroup freezer).
func (m *Manager) Pause(ctx context.Context, ref string) (*Sandbox, error) {
	return m.setFrozen(ctx, ref, true)
}

// Resume thaws a paused sandbox.
func (m *Manager) Resume(ctx context.Context, ref string) (*Sandbox, error) {
	return m.setFrozen(ctx, ref, false)
}

func (m *Manager) setFrozen(ctx context.Context, ref string, freeze bool) (*Sandbox, error) {
	m.reapExpired(ctx)
	l, sb, err := m.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	m.refresh(l, sb)
	want, from := StatusPaused, StatusRunning
	if !freeze {
		want, from = StatusRunning, StatusPaused
	}
	if sb.Status == want {
		return sb, nil
	}
	if sb.Status != from {
		return nil, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	ctr, err := m.container(sb)
	if err != nil {
		return nil, err
	}
	if freeze {
		err = ctr.Pause()
	} else {
		err = ctr.Resume()
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
	}
	sb.Status = want
	if err := l.Write(sb); err != nil {
		return nil, err
	}
	if freeze {
		m.emit(EventPaused, sb)
	} else {
		m.emit(EventResumed, sb)
	}
	return sb, nil
}

// Stats reads what the sandbox uses now from its cgroups.
func (m *Manager) Stats(ctx context.Context, ref string) (*cgroup.Usage, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.Status != StatusRunning && sb.Status != StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	ctr, err := m.container(sb)
	if err != nil {
		return nil, err
	}
	u, err := ctr.Usage()
	if err != nil {
		return nil, err
	}
	return &u, nil
}

// Remove releases everything the sandbox created and forgets it. A
// running or paused sandbox is only removed with force (it is killed);
// otherwise Remove fails with ErrState.
func (m *Manager) Remove(ctx context.Context, ref string, force bool) error {
	m.reapExpired(ctx)
	l, sb, err := m.lock(ctx, ref)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if sb.Status == StatusUnreadable {
		if !force {
			return fmt.Errorf("%w: %s", ErrState, sb.Problem)
		}
		// Whatever the damaged record described: everything a sandbox of
		// this id can have made (releasing what was never made is a no-op).
		sb.Options.Network = string(netns.ModeBridge)
		sb.Resources = m.plan(sb)
		if names, err := m.store.Names(); err == nil {
			for name, owner := range names {
				if owner == sb.ID {
					sb.Name = name
				}
			}
		}
	} else {
		m.refresh(l, sb)
	}
	if (sb.Status == StatusRunning || sb.Status == StatusPaused) && !force {
		return fmt.Errorf("%w: sandbox %s is %s: stop it first or force the removal (rm -f)", ErrState, sb.ShortID(), sb.Status)
	}
	if err := m.destroy(ctx, l, sb); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", sb.ShortID(), err)
	}
	return nil
}

// Info is a sandbox's record with what only the host can tell now.
type Info struct {
	*Sandbox
	// Pids are the host PIDs of every process in the sandbox.
	Pids []int `json:"pids,omitempty"`
}

// Inspect returns the record of the sandbox ref with its current processes.
func (m *Manager) Inspect(ctx context.Context, ref string) (*Info, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	info := &Info{Sandbox: sb}
	if sb.Status == StatusRunning || sb.Status == StatusPaused {
		info.Pids, _ = sandboxPids(sb.ID)
	}
	return info, nil
}

// SocketPath returns the host path of the executor socket of a running
// sandbox, for front-ends that proxy the executor's API.
func (m *Manager) SocketPath(ctx context.Context, ref string) (string, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	if sb.Status == StatusStopped {
		return "", stoppedError(sb)
	}
	if sb.Status != StatusRunning {
		return "", fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	return sb.Socket, nil
}

// Dial connects to the executor of a running sandbox.
func (m *Manager) Dial(ctx context.Context, ref string) (net.Conn, error) {
	sock, err := m.SocketPath(ctx, ref)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("connect to the executor of %s: %w", ref, err)
	}
	return c, nil
}

// Touch is a no-op that runs TTL expiry; front-ends call it at start.
func (m *Manager) Touch(ctx context.Context) { m.reapExpired(ctx) }
