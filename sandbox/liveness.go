package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/sbxrun/sbx"
)

// procStart returns the start time (in clock ticks after boot, field 22 of
// /proc/PID/stat) of a live process; ok is false when no such process
// runs or it is a zombie.
func procStart(pid int) (start uint64, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces and parentheses: the fields
	// after it start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false // f[0] is field 3 (state), f[19] field 22
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return start, true
}

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
	if (sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused) || sb.Pid == 0 || pid1Alive(sb) {
		return
	}
	if l, err := h.store.TryLock(sb.ID); err == nil {
		var cur sbx.Sandbox
		if l.Read(&cur) == nil && cur.Status == sb.Status && cur.Pid == sb.Pid && cur.PidStart == sb.PidStart {
			h.markStopped(l, &cur)
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
