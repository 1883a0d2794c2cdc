package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
)

// RemoveWhenDone is docker run --rm for a long-lived sandbox: it waits
// until the main command of the sandbox ref (created with
// Options.AutoRemove) has ended for good, or the sandbox stopped, and
// removes the sandbox. It returns nil once the sandbox is gone, also when
// another process removed it first, and ctx's error when ctx ends first.
// A server runs it for every such sandbox (StartBackground); the CLI in a
// background process of its own (sbx auto-remove).
func (h *Host) RemoveWhenDone(ctx context.Context, ref string) error {
	sb, err := h.Get(ctx, ref)
	if errors.Is(err, sbx.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !sb.Options.AutoRemove {
		return fmt.Errorf("%w: sandbox %s was not created to be removed when its command ends (auto_remove)", sbx.ErrState, sb.ShortID())
	}
	for {
		if _, err := h.Wait(ctx, sb.ID); err != nil {
			if errors.Is(err, sbx.ErrNotFound) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("auto-remove sandbox %s: wait for its command: %w", sb.ShortID(), err)
		}
		err := h.removeIfDone(ctx, sb.ID, autoRemoveProbe)
		switch {
		case err == nil, errors.Is(err, sbx.ErrNotFound):
			return nil
		case errors.Is(err, errNotDone):
			// Started again since (sbx restart), or stopped a moment ago
			// and maybe about to be: look again after a while.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(restartGrace / 4):
			}
			continue
		case errors.Is(err, sbx.ErrBusy):
			// Another process holds it (a remove under way): look again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		default:
			return fmt.Errorf("auto-remove sandbox %s: %w", sb.ShortID(), err)
		}
	}
}

// errNotDone: the sandbox's main command has not ended, or it could not
// be asked.
var errNotDone = errors.New("its main command has not ended")

// restartGrace is how long a stopped sandbox is kept from removal: sbx
// restart is a stop and then a start, and docker keeps a --rm container
// through a restart.
const restartGrace = time.Second

// autoRemoveProbe bounds how long one question to a running sandbox's
// executor, whether its main command has ended, may take.
const autoRemoveProbe = 2 * time.Second

// removeIfDone removes the sandbox id if, under its lock, it is stopped or
// its main command has ended for good; otherwise it returns errNotDone and
// changes nothing. The check and the removal are one step, so a sandbox
// that was stopped and started again (sbx restart) in between is kept; one
// stopped less than restartGrace ago is not done yet either.
// The executor is asked without waiting, for at most probe.
func (h *Host) removeIfDone(ctx context.Context, id string, probe time.Duration) error {
	l, sb, err := h.lock(ctx, id)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if sb.Status == sbx.StatusUnreadable {
		return fmt.Errorf("%w: %s", sbx.ErrState, sb.Problem)
	}
	h.refresh(l, sb)
	switch sb.Status {
	case sbx.StatusStopped:
		if sb.Stopped != nil && time.Since(*sb.Stopped) < restartGrace {
			return errNotDone
		}
	case sbx.StatusRunning:
		if !h.cmdEnded(ctx, sb, probe) {
			return errNotDone
		}
	default:
		return errNotDone
	}
	h.noteOOMKills(sb)
	if err := h.destroy(ctx, l, sb); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", sb.ShortID(), err)
	}
	return nil
}

// autoRemoveCandidate reports whether a background watcher should run
// RemoveWhenDone for sb: it asked for it and is past its creation.
func autoRemoveCandidate(sb *sbx.Sandbox) bool {
	if !sb.Options.AutoRemove || sb.Pool != "" {
		return false
	}
	switch sb.Status {
	case sbx.StatusRunning, sbx.StatusPaused, sbx.StatusStopped:
		return true
	}
	return false
}

// cmdEnded asks the executor of the running sandbox sb, for at most probe,
// whether its main command has ended for good (false for a sandbox
// without one, or when the executor does not say).
func (h *Host) cmdEnded(ctx context.Context, sb *sbx.Sandbox, probe time.Duration) bool {
	if len(sb.Options.Cmd) == 0 {
		return false
	}
	c, _ := h.executor(sb)
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, probe)
	defer cancel()
	st, err := c.MainCmd(pctx)
	return err == nil && st.State == execapi.MainCmdExited
}
