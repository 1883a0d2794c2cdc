package cgroup

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ReadUsage reads a sandbox's usage from its cgroup files on a v1 or
// hybrid host, given its cgroup paths by controller (libcontainer's
// state.CgroupPaths). It returns what UsageFrom returns for libcontainer's
// GetStats of the same cgroups, reading only the files a Usage holds:
// GetStats of every hierarchy reads about forty files (memory.stat,
// blkio, cpuset, hugetlb...), about a millisecond at the end of every run.
// ok is false on a v2 host, where the caller uses GetStats.
func ReadUsage(paths map[string]string) (u Usage, ok bool, err error) {
	if DetectMode() == ModeV2 {
		return Usage{}, false, nil
	}
	r := usageReader{}
	if p := paths["cpuacct"]; p != "" {
		u.CPUTime = time.Duration(r.uint(p, "cpuacct.usage"))
		user, sys, ok := r.perCPUModes(p)
		if !ok { // kernels without cpuacct.usage_all: USER_HZ ticks, as libcontainer reads them
			user, sys = r.key(p, "cpuacct.stat", "user")*1e9/100, r.key(p, "cpuacct.stat", "system")*1e9/100
		}
		u.UserTime, u.SysTime = time.Duration(user), time.Duration(sys)
	}
	if p := paths["cpu"]; p != "" {
		u.CPUThrottled = time.Duration(r.key(p, "cpu.stat", "throttled_time"))
	}
	if p := paths["memory"]; p != "" {
		u.MemoryCurrent = r.uint(p, "memory.usage_in_bytes")
		u.MemoryPeak = r.uint(p, "memory.max_usage_in_bytes")
		if l := r.uint(p, "memory.limit_in_bytes"); l > 0 && l < 1<<62 {
			u.MemoryLimit = l
		}
		u.OOMKills = readKey(filepath.Join(p, "memory.oom_control"), "oom_kill")
	}
	if p := paths["pids"]; p != "" {
		u.Pids = r.uint(p, "pids.current")
		if l := r.uint(p, "pids.max"); l < 1<<62 {
			u.PidsLimit = l
		}
	}
	if p := paths[""]; p != "" {
		u.PidsPeak = readUint(filepath.Join(p, "pids.peak"))
	}
	if p := paths["pids"]; p != "" && u.PidsPeak == 0 {
		u.PidsPeak = readUint(filepath.Join(p, "pids.peak")) // v1 has it since Linux 6.1
	}
	return u, true, r.err
}

// usageReader keeps the first error of a series of reads.
type usageReader struct{ err error }

func (r *usageReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// uint reads a file holding one number ("max" is the largest).
func (r *usageReader) uint(dir, file string) uint64 {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		r.fail(fmt.Errorf("read cgroup usage: %w", err))
		return 0
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return math.MaxUint64
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		r.fail(fmt.Errorf("read cgroup usage: %s/%s: %w", dir, file, err))
	}
	return n
}

// key reads the value of key in a file of "key value" lines; 0 when the
// file or the key is missing.
func (r *usageReader) key(dir, file, key string) uint64 {
	return readKey(filepath.Join(dir, file), key)
}

// perCPUModes sums cpuacct.usage_all's user and system columns (ns);
// ok is false when the kernel has no such file.
func (r *usageReader) perCPUModes(dir string) (user, sys uint64, ok bool) {
	f, err := os.Open(filepath.Join(dir, "cpuacct.usage_all"))
	if err != nil {
		if !os.IsNotExist(err) {
			r.fail(fmt.Errorf("read cgroup usage: %w", err))
		}
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header: cpu user system
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		u, err1 := strconv.ParseUint(fields[1], 10, 64)
		s, err2 := strconv.ParseUint(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			r.fail(fmt.Errorf("read cgroup usage: %s/cpuacct.usage_all: %q", dir, sc.Text()))
			return 0, 0, true
		}
		user, sys = user+u, sys+s
	}
	return user, sys, true
}
