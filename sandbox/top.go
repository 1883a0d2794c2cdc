package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

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
	out := make([]sbx.ProcessInfo, 0, len(pids))
	for _, pid := range pids {
		if p, ok := processInfo("/proc", pid); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// processInfo reads one process from procRoot (/proc); false when it is
// gone. It reads /proc/PID/stat, status and cmdline itself: a library for
// it (procfs) cost every sbx process 0.3 ms at start for its tables.
func processInfo(procRoot string, pid int) (sbx.ProcessInfo, bool) {
	dir := procRoot + "/" + strconv.Itoa(pid)
	stat, ok := readProcStat(dir)
	if !ok {
		return sbx.ProcessInfo{}, false
	}
	uid, nspids, ok := readProcStatus(dir)
	if !ok {
		return sbx.ProcessInfo{}, false
	}
	info := sbx.ProcessInfo{PID: pid, HostPID: pid, State: stat.state, CPUTimeS: float64(stat.utime+stat.stime) / userHZ,
		RSSBytes: stat.rss * int64(os.Getpagesize()), UID: uid}
	if n := len(nspids); n > 0 {
		info.PID = nspids[n-1] // innermost: the sandbox's own
	}
	if _, ps, ok := readProcStatus(procRoot + "/" + strconv.Itoa(stat.ppid)); ok && len(ps) == len(nspids) && len(ps) > 0 {
		info.PPID = ps[len(ps)-1] // 0: the parent is outside the sandbox
	}
	var args []string
	if data, err := readCapped(dir+"/cmdline", maxTopCommand+1); err == nil && len(data) > 0 {
		args = strings.Split(string(bytes.TrimRight(data, "\x00")), "\x00")
	}
	if len(args) == 0 {
		args = []string{"[" + stat.comm + "]"}
	}
	info.Command = termsafe.String(strings.Join(args, " "), maxTopCommand)
	return info, true
}

// readCapped reads at most n bytes of a file: a command line the sandbox
// wrote can be as long as ARG_MAX, and Top shows maxTopCommand of it.
func readCapped(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture sbx runs on).
const userHZ = 100

// procStat is what Top uses of /proc/PID/stat.
type procStat struct {
	comm, state  string
	ppid         int
	utime, stime uint64
	rss          int64 // pages
}

// readProcStat parses /proc/PID/stat. The command name sits in
// parentheses and may itself hold spaces and ')', so the fields are
// counted from the last ')'.
func readProcStat(dir string) (procStat, bool) {
	data, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return procStat{}, false
	}
	l, r := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if l < 0 || r < l {
		return procStat{}, false
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15) ... rss(24).
	f := strings.Fields(string(data[r+1:]))
	if len(f) < 22 {
		return procStat{}, false
	}
	st := procStat{comm: string(data[l+1 : r]), state: f[0]}
	var e1, e2, e3, e4 error
	st.ppid, e1 = strconv.Atoi(f[1])
	st.utime, e2 = strconv.ParseUint(f[11], 10, 64)
	st.stime, e3 = strconv.ParseUint(f[12], 10, 64)
	st.rss, e4 = strconv.ParseInt(f[21], 10, 64)
	return st, e1 == nil && e2 == nil && e3 == nil && e4 == nil
}

// readProcStatus returns the real UID and the PID in each nested PID
// namespace (NSpid, outermost first) from /proc/PID/status.
func readProcStatus(dir string) (uid int, nspids []int, ok bool) {
	data, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0, nil, false
	}
	haveUID := false
	for _, line := range strings.Split(string(data), "\n") {
		key, val, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		f := strings.Fields(val)
		switch key {
		case "Uid":
			if len(f) > 0 {
				uid, err = strconv.Atoi(f[0])
				haveUID = err == nil
			}
		case "NSpid":
			for _, s := range f {
				n, err := strconv.Atoi(s)
				if err != nil {
					return 0, nil, false
				}
				nspids = append(nspids, n)
			}
		}
	}
	return uid, nspids, haveUID
}
