package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/termsafe"
)

// maxTopCommand bounds each command line Top reports.
const maxTopCommand = 4096

// Top lists the processes of a running or paused sandbox from its cgroup
// and the host's /proc, PID order. What a process shows in /proc (its
// name, command line) is the sandbox's to choose: it is made safe to print
// and bounded. A process that exits meanwhile is left out.
func (h *Host) Top(ctx context.Context, ref string) ([]sbx.ProcessInfo, error) {
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s: only a running sandbox has processes", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	pids, err := cgroup.Pids(sb.ID)
	if err != nil {
		return nil, fmt.Errorf("processes of sandbox %s: %w", sb.ShortID(), err)
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	out := make([]sbx.ProcessInfo, 0, len(pids))
	for _, pid := range pids {
		if p, ok := processInfo(fs, pid); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// processInfo reads one process from /proc; false when it is gone.
func processInfo(fs procfs.FS, pid int) (sbx.ProcessInfo, bool) {
	p, err := fs.Proc(pid)
	if err != nil {
		return sbx.ProcessInfo{}, false
	}
	stat, err := p.Stat()
	if err != nil {
		return sbx.ProcessInfo{}, false
	}
	status, err := p.NewStatus()
	if err != nil {
		return sbx.ProcessInfo{}, false
	}
	info := sbx.ProcessInfo{PID: pid, HostPID: pid, State: stat.State, CPUTimeS: stat.CPUTime(),
		RSSBytes: int64(stat.ResidentMemory()), UID: int(status.UIDs[0])}
	if n := len(status.NSpids); n > 0 {
		info.PID = int(status.NSpids[n-1]) // innermost: the sandbox's own
	}
	if parent, err := fs.Proc(stat.PPID); err == nil {
		if ps, err := parent.NewStatus(); err == nil && len(ps.NSpids) == len(status.NSpids) && len(ps.NSpids) > 0 {
			info.PPID = int(ps.NSpids[len(ps.NSpids)-1]) // 0: the parent is outside the sandbox
		}
	}
	args, err := p.CmdLine()
	if err != nil || len(args) == 0 {
		args = []string{"[" + stat.Comm + "]"}
	}
	info.Command = termsafe.String(strings.Join(args, " "), maxTopCommand)
	return info, true
}
