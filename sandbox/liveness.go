package sandbox

import (
	"fmt"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// procStart returns the start time of a live process (state.ProcessStart).
func procStart(pid int) (start uint64, ok bool) { return state.ProcessStart(pid) }

// pid1Alive reports whether the PID 1 recorded for a running or paused
// sandbox still runs: the same PID with the same start time, so a reused
// PID does not count. It reads one small /proc file and takes no lock.
func pid1Alive(sb *sbx.Sandbox) bool {
	start, ok := procStart(sb.Pid)
	if !ok {
		return false
	}
	return sb.PidStart == 0 || start == sb.PidStart
}

// checkAlive marks a running or paused record whose PID 1 is gone as
// stopped. Reads need no lock; the change is written back only when the
// sandbox's lock is free at once (a busy sandbox is refreshed by whoever
// holds it, or by the next locked operation).
func (h *Host) checkAlive(sb *sbx.Sandbox) {
	h.healReadPauseUnlocked(sb)
	if (sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused) || sb.Pid == 0 || pid1Alive(sb) {
		return
	}
	if l, err := h.store.TryLock(sb.ID); err == nil {
		var cur sbx.Sandbox
		if l.Read(&cur) == nil && cur.Status == sb.Status && cur.Pid == sb.Pid && cur.PidStart == sb.PidStart {
			if err := h.markStopped(l, &cur); err != nil {
				h.log.Warn("record stopped sandbox", "id", cur.ID, "err", err)
			}
			l.Unlock()
			*sb = cur
			return
		}
		l.Unlock()
	}
	now := h.now().UTC()
	sb.Status, sb.Stopped, sb.Pid, sb.PidStart = sbx.StatusStopped, &now, 0, 0
}

// stoppedError is the error for an operation that needs a running sandbox
// whose PID 1 has exited.
func stoppedError(sb *sbx.Sandbox) error {
	return fmt.Errorf("%w: sandbox %s is stopped: its PID 1 exited; sbx start or sbx rm it", sbx.ErrState, sb.ShortID())
}
