package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
)

// Stats reads what the sandbox uses now from its cgroups.
func (h *Host) Stats(ctx context.Context, ref string) (*sbx.Usage, error) {
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	ctr, err := h.container(sb)
	if err != nil {
		return nil, err
	}
	u, err := ctr.Usage()
	if err != nil {
		return nil, err
	}
	return usage(u), nil
}

// usage is the contract's form of a cgroup reading.
func usage(u cgroup.Usage) *sbx.Usage {
	return &sbx.Usage{
		CPUTimeS: u.CPUTime.Seconds(), UserTimeS: u.UserTime.Seconds(), SysTimeS: u.SysTime.Seconds(),
		CPUThrottledS: u.CPUThrottled.Seconds(), MemoryCurrentBytes: u.MemoryCurrent, MemoryPeakBytes: u.MemoryPeak,
		MemoryLimitBytes: u.MemoryLimit, OOMKills: u.OOMKills, Pids: u.Pids, PidsPeak: u.PidsPeak, PidsLimit: u.PidsLimit,
	}
}

// noteOOMKills reads the sandbox's OOM kill count one last time before its
// cgroup goes, so that the kills of a sandbox removed between two polls of
// the watcher (a remote one-shot run) still reach the events and
// sbx_oom_kills_total.
func (h *Host) noteOOMKills(sb *sbx.Sandbox) {
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return
	}
	if n, err := cgroup.OOMKills(sb.ID); err == nil {
		h.events.tracker.oomKills(sb, n)
	}
}
