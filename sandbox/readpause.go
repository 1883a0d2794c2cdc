package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// readPauseFile, in a sandbox's runtime directory, records that a process
// froze the sandbox to read its root (export, commit, diff). It is written
// before the freeze and removed after the thaw, and the freezing process
// holds the sandbox's lock all the while: whoever takes the lock and finds
// the file knows that process died (kill -9, a signal) and thaws.
const readPauseFile = "read-pause"

// pauseToRead pauses a running sandbox while the host reads its root or
// writable layer (for what: export, commit, diff), so that nothing in it
// changes meanwhile and it cannot swap a directory for a symlink between
// the walk's listing and its reading; a paused or stopped one stays as it
// is. The pause is recorded first (the record says paused, and
// readPauseFile names what paused it), so a process that dies before
// resume leaves a sandbox that the next operation thaws (healReadPause).
// resume undoes the pause; l must be held until it has run. While paused,
// SIGPIPE does not kill this process (a write to a closed stdout fails
// instead, and resume runs).
func (h *Host) pauseToRead(l *state.Lock, sb *sbx.Sandbox, what string) (resume func(), err error) {
	switch sb.Status {
	case sbx.StatusRunning:
	case sbx.StatusPaused, sbx.StatusStopped:
		return func() {}, nil
	default:
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	ctr, err := h.container(sb)
	if err != nil {
		return nil, err
	}
	marker := filepath.Join(h.store.RunDir(sb.ID), readPauseFile)
	if err := os.WriteFile(marker, []byte(what+" "+strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("record the pause of sandbox %s for %s: %w", sb.ShortID(), what, err)
	}
	sb.Status = sbx.StatusPaused
	if err := l.Write(sb); err != nil {
		sb.Status = sbx.StatusRunning
		_ = os.Remove(marker)
		return nil, fmt.Errorf("record the pause of sandbox %s for %s: %w", sb.ShortID(), what, err)
	}
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, unix.SIGPIPE)
	undo := func() {
		signal.Stop(pipe)
		if err := h.endReadPause(l, sb, ctr.Resume); err != nil {
			h.log.Warn("end the pause of a sandbox read", "id", sb.ID, "what", what, "err", err)
		}
	}
	if err := ctr.Pause(); err != nil {
		undo()
		return nil, fmt.Errorf("pause sandbox %s for %s: %w", sb.ShortID(), what, err)
	}
	h.crashPoint(what + "-paused")
	return undo, nil
}

// endReadPause thaws a sandbox paused by pauseToRead (thaw), records it
// running again, and removes readPauseFile, in that order: a crash between
// the steps leaves the file, and the next operation finishes the job.
func (h *Host) endReadPause(l *state.Lock, sb *sbx.Sandbox, thaw func() error) error {
	if err := thaw(); err != nil {
		return fmt.Errorf("thaw sandbox %s: %w", sb.ShortID(), err)
	}
	if sb.Status == sbx.StatusPaused {
		sb.Status = sbx.StatusRunning
		if err := l.Write(sb); err != nil {
			sb.Status = sbx.StatusPaused
			return err
		}
	}
	return os.Remove(filepath.Join(h.store.RunDir(sb.ID), readPauseFile))
}

// healReadPause finishes the pause of a reader that died (readPauseFile
// is there while the caller holds l, so its writer is gone): the sandbox
// is thawed and recorded running again. It reports whether it acted.
func (h *Host) healReadPause(l *state.Lock, sb *sbx.Sandbox) bool {
	if _, err := os.Lstat(filepath.Join(h.store.RunDir(sb.ID), readPauseFile)); err != nil {
		return false
	}
	thaw := func() error {
		ctr, err := h.container(sb)
		if err != nil {
			return err
		}
		if ctr.Status() == "paused" {
			return ctr.Resume()
		}
		return nil
	}
	if sb.Status != sbx.StatusPaused && sb.Status != sbx.StatusRunning {
		thaw = func() error { return nil } // stopped meanwhile: nothing to thaw
	}
	if err := h.endReadPause(l, sb, thaw); err != nil {
		h.log.Warn("thaw a sandbox left paused by a dead reader", "id", sb.ID, "err", err)
		return false
	}
	h.log.Info("thawed a sandbox left paused by an interrupted export, commit or diff", "id", sb.ID)
	return true
}

// healReadPauseUnlocked is healReadPause for a record read without the
// lock (Get, List): it acts only when the lock is free, i.e. no reader
// holds the pause now, and updates sb.
func (h *Host) healReadPauseUnlocked(sb *sbx.Sandbox) {
	if sb.Status != sbx.StatusPaused {
		return
	}
	if _, err := os.Lstat(filepath.Join(h.store.RunDir(sb.ID), readPauseFile)); err != nil {
		return
	}
	l, err := h.store.TryLock(sb.ID)
	if err != nil {
		return // a reader holds it: the pause is live
	}
	defer l.Unlock()
	var cur sbx.Sandbox
	if l.Read(&cur) == nil && h.healReadPause(l, &cur) {
		*sb = cur
	}
}

// thawFrozenRunning thaws a sandbox whose record says running but whose
// freezer is frozen (a pause no record tells of: an interrupted read by an
// older sbx, or a freeze from outside), so that it is what its record
// says. The caller holds the sandbox's lock.
func (h *Host) thawFrozenRunning(sb *sbx.Sandbox) error {
	if sb.Status != sbx.StatusRunning {
		return nil
	}
	ctr, err := h.container(sb)
	if err != nil || ctr.Status() != "paused" {
		return nil
	}
	h.log.Info("thawing a sandbox that is frozen though its record says running", "id", sb.ID)
	return ctr.Resume()
}

// ctxWriter fails writes once ctx is done, so that a long read of a
// sandbox (an export to a slow reader) stops, and thaws, when its caller
// is cancelled (sbx export interrupted by ^C).
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, errors.Join(errors.New("cancelled"), err)
	}
	return c.w.Write(p)
}
