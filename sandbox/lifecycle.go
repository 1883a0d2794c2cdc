package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/sandbox/state"
	"golang.org/x/sys/unix"
)

// refresh marks a running or paused sandbox stopped when its PID 1 is
// gone (it exited on its own, or the host restarted). Only a container
// that reports itself stopped, or whose state no longer exists, counts;
// any other error leaves the record alone.
func (h *Host) refresh(l *state.Lock, sb *sbx.Sandbox) {
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return
	}
	ctr, err := h.container(sb)
	switch {
	case errors.Is(err, isolate.ErrNotExist):
	case err != nil:
		h.log.Warn("cannot tell whether the sandbox runs", "id", sb.ID, "err", err)
		return
	case ctr.Status() != "stopped":
		return
	}
	if err := h.markStopped(l, sb); err != nil {
		h.log.Warn("record stopped sandbox", "id", sb.ID, "err", err)
	}
}

// markStopped records that sb's PID 1 is gone. An error means the record
// still says what it said before (the next operation finds PID 1 gone
// and records it again); sb says stopped either way, as the sandbox is.
func (h *Host) markStopped(l *state.Lock, sb *sbx.Sandbox) error {
	now := h.now().UTC()
	sb.Status = sbx.StatusStopped
	sb.Stopped = &now
	sb.Pid, sb.PidStart = 0, 0
	if err := l.Write(sb); err != nil {
		return err
	}
	h.emit(changeStopped, sb)
	return nil
}

// Stop sends o.Signal (SIGTERM) to the sandbox's main command, if it has
// one (its end and output are saved for Wait and Logs), then to its PID 1,
// waits up to o.Timeout (sbx.DefaultStopTimeout) for each and then kills
// it. The root file system is kept until Remove; Start runs the sandbox
// (and its main command) again.
func (h *Host) Stop(ctx context.Context, ref string, o sbx.StopOptions) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	sig := unix.SIGTERM
	if o.Signal != "" {
		if sig = unix.SignalNum(o.Signal); sig == 0 {
			return nil, fmt.Errorf("%w: signal %q: use a name like SIGTERM", sbx.ErrInvalid, o.Signal)
		}
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: stop timeout must not be negative", sbx.ErrInvalid)
	}
	if err := h.checkDestructiveRef(ref); err != nil {
		return nil, err
	}
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	h.refresh(l, sb)
	if sb.Status == sbx.StatusStopped {
		// Checkpointed for idleness, now stopped on purpose: the next call
		// no longer restores it (Start does).
		if sb.Idle {
			sb.Idle = false
			if err := l.Write(sb); err != nil {
				return nil, err
			}
		}
		return sb, nil
	}
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	if o.Checkpoint {
		return h.stopCheckpoint(ctx, l, sb, false)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = sbx.DefaultStopTimeout
	}
	ctr, err := h.container(sb)
	if err != nil {
		return nil, err
	}
	// The main command gets the signal first, so its end and output are
	// saved before PID 1 goes.
	h.stopMainCmd(ctx, sb, unix.SignalName(sig), timeout)
	if err := stopContainer(ctx, ctr, sig, timeout); err != nil {
		return nil, err
	}
	if err := h.markStopped(l, sb); err != nil {
		return nil, fmt.Errorf("sandbox %s stopped, but its record could not say so: %w", sb.ShortID(), err)
	}
	return sb, nil
}

// Start runs a stopped sandbox again on its kept root file system.
func (h *Host) Start(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	h.refresh(l, sb)
	if sb.Status == sbx.StatusRunning {
		return sb, nil
	}
	if sb.Status != sbx.StatusStopped {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	err = h.inMountNS(sb.ID, func() error {
		_, err := os.Stat(sb.RootPath)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: the root file system of sandbox %s is gone (did the host restart?): remove it with sbx rm", sbx.ErrState, sb.ShortID())
	}
	if sb.Checkpoint != "" && h.hasSnapshot(sb.Checkpoint) {
		if err := h.resumeCheckpoint(ctx, l, sb); err != nil {
			return nil, err
		}
		return sb, nil
	}
	// A checkpoint removed meanwhile: the sandbox starts anew.
	sb.Checkpoint, sb.Idle = "", false
	// The old container's state and cgroups go first; the root stays.
	if err := releaseContainer(ctx, h.containerRoot(), sb.ID); err != nil {
		return nil, err
	}
	// The new container starts from the sandbox's mount namespace, where
	// its root is mounted.
	cgroup.OpenRootHandle()
	err = h.inMountNS(sb.ID, func() error { return h.startExecutor(ctx, sb, nil, nil) })
	if err != nil {
		_ = releaseContainer(context.WithoutCancel(ctx), h.containerRoot(), sb.ID)
		return nil, err
	}
	if len(sb.Options.Cmd) > 0 {
		// The main command runs again, as after create.
		if _, err := h.startMainCmd(ctx, sb); err != nil {
			if ctr, cerr := h.container(sb); cerr == nil {
				_ = killAndWait(context.WithoutCancel(ctx), ctr)
			}
			_ = releaseContainer(context.WithoutCancel(ctx), h.containerRoot(), sb.ID)
			return nil, err
		}
	}
	now := h.now().UTC()
	sb.Status, sb.Started, sb.Stopped, sb.CmdExit = sbx.StatusRunning, &now, nil, nil
	sb.RestartCount, sb.CmdRestarting = 0, nil
	if err := l.Write(sb); err != nil {
		return nil, err
	}
	h.emit(changeStarted, sb)
	return sb, nil
}

// Pause freezes every process of the sandbox (cgroup freezer).
func (h *Host) Pause(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return h.setFrozen(ctx, ref, true)
}

// Resume thaws a paused sandbox.
func (h *Host) Resume(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return h.setFrozen(ctx, ref, false)
}

func (h *Host) setFrozen(ctx context.Context, ref string, freeze bool) (*sbx.Sandbox, error) {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	h.refresh(l, sb)
	want, from := sbx.StatusPaused, sbx.StatusRunning
	if !freeze {
		want, from = sbx.StatusRunning, sbx.StatusPaused
	}
	if sb.Status == want {
		if !freeze {
			// Frozen though recorded running: resume thaws it.
			if err := h.thawFrozenRunning(sb); err != nil {
				return nil, fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
			}
		}
		return sb, nil
	}
	if sb.Status != from {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	ctr, err := h.container(sb)
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
		h.emit(changePaused, sb)
	} else {
		h.emit(changeResumed, sb)
	}
	return sb, nil
}

// Remove releases everything the sandbox created and forgets it. A
// running or paused sandbox is only removed with o.Force (it is killed);
// otherwise Remove fails with sbx.ErrState.
func (h *Host) Remove(ctx context.Context, ref string, o sbx.RemoveOptions) error {
	h.removeExpired(ctx)
	if err := h.checkDestructiveRef(ref); err != nil {
		return err
	}
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if sb.Status == sbx.StatusUnreadable {
		if !o.Force {
			return fmt.Errorf("%w: %s", sbx.ErrState, sb.Problem)
		}
		// Whatever the damaged record described: everything a sandbox of
		// this id can have made (releasing what was never made is a no-op).
		sb.Options.Network, sb.Options.UserNS = sbx.NetworkBridge, sbx.UserNSPrivate
		sb.Resources = h.plan(sb)
		if names, err := h.store.Names(); err == nil {
			for name, owner := range names {
				if owner == sb.ID {
					sb.Name = name
				}
			}
		}
	} else {
		h.refresh(l, sb)
	}
	// A running sandbox whose main command ended for good is exited, as
	// docker's container then is: removed without Force.
	exited := sb.Status == sbx.StatusRunning && (sb.CmdExit != nil || h.cmdEnded(ctx, sb, autoRemoveProbe))
	if (sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused) && !o.Force && !exited {
		return fmt.Errorf("%w: sandbox %s is %s: stop it first or force the removal (rm -f)", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	h.noteOOMKills(sb)
	if err := h.destroy(ctx, l, sb); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", sb.ShortID(), err)
	}
	return nil
}
