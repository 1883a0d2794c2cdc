package cgroup

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ocg "github.com/opencontainers/cgroups"
)

// Usage is what a sandbox has used, read from its cgroup.
type Usage struct {
	CPUTime       time.Duration `json:"cpu_time"`
	UserTime      time.Duration `json:"user_time"`
	SysTime       time.Duration `json:"sys_time"`
	MemoryCurrent uint64        `json:"memory_current_bytes"`
	MemoryPeak    uint64        `json:"memory_peak_bytes"`
	MemoryLimit   uint64        `json:"memory_limit_bytes,omitempty"`
	OOMKills      uint64        `json:"oom_kills"`
	Pids          uint64        `json:"pids"`
	PidsPeak      uint64        `json:"pids_peak,omitempty"` // zero where the host does not track it
	PidsLimit     uint64        `json:"pids_limit,omitempty"`
	CPUThrottled  time.Duration `json:"cpu_throttled"`
}

// UsageFrom turns libcontainer's cgroup statistics into a Usage, adding the
// counters libcontainer does not read (OOM kills, peak pids). paths are the
// container's cgroup paths by controller ("" is the v2 or unified path).
func UsageFrom(st *ocg.Stats, paths map[string]string) Usage {
	cpu := st.CpuStats.CpuUsage
	u := Usage{
		CPUTime:       time.Duration(cpu.TotalUsage),
		UserTime:      time.Duration(cpu.UsageInUsermode),
		SysTime:       time.Duration(cpu.UsageInKernelmode),
		MemoryCurrent: st.MemoryStats.Usage.Usage,
		MemoryPeak:    st.MemoryStats.Usage.MaxUsage,
		Pids:          st.PidsStats.Current,
		PidsLimit:     st.PidsStats.Limit,
		CPUThrottled:  time.Duration(st.CpuStats.ThrottlingData.ThrottledTime),
	}
	// On v1, libcontainer takes the split from cpuacct.stat, which counts
	// USER_HZ ticks (10 ms); cpuacct.usage_all has it per CPU in
	// nanoseconds.
	if len(cpu.PercpuUsageInUsermode) > 0 || len(cpu.PercpuUsageInKernelmode) > 0 {
		u.UserTime, u.SysTime = time.Duration(sum(cpu.PercpuUsageInUsermode)), time.Duration(sum(cpu.PercpuUsageInKernelmode))
	}
	if l := st.MemoryStats.Usage.Limit; l > 0 && l < 1<<62 {
		u.MemoryLimit = l
	}
	if u.PidsLimit >= 1<<62 {
		u.PidsLimit = 0
	}
	if p, ok := paths["memory"]; ok && p != "" && DetectMode() != ModeV2 {
		u.OOMKills = readKey(filepath.Join(p, "memory.oom_control"), "oom_kill")
	}
	if p := paths[""]; p != "" {
		if DetectMode() == ModeV2 {
			u.OOMKills = readKey(filepath.Join(p, "memory.events"), "oom_kill")
			if u.MemoryPeak == 0 {
				u.MemoryPeak = readUint(filepath.Join(p, "memory.peak"))
			}
		}
		u.PidsPeak = readUint(filepath.Join(p, "pids.peak"))
	}
	if p, ok := paths["pids"]; ok && p != "" && u.PidsPeak == 0 {
		u.PidsPeak = readUint(filepath.Join(p, "pids.peak")) // v1 has it since Linux 6.1
	}
	return u
}

func sum(ns []uint64) uint64 {
	var t uint64
	for _, n := range ns {
		t += n
	}
	return t
}

// readKey reads "key value" lines and returns the value of key, or 0.
func readKey(path, key string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func readUint(path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return n
}
