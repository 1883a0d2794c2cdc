package executor

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
)

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, readInfo(s.defaultWorkdir()))
}

// readInfo reads resource use as the sandbox sees it: its cgroup (v2 or
// v1, found through /proc/self/cgroup), /proc/meminfo and the file system
// of the working directory.
func readInfo(workdir string) api.Info {
	var info api.Info
	info.CPU.Count = runtime.NumCPU()
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 0 {
			info.CPU.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	mem := meminfo()
	info.Memory.TotalBytes = mem["MemTotal"]
	info.Memory.AvailableBytes = mem["MemAvailable"]
	info.Memory.UsedBytes = mem["MemTotal"] - mem["MemAvailable"]

	cg := cgroupPaths()
	if dir, ok := cg[""]; ok { // cgroup v2
		base := filepath.Join(cgroupRoot, dir)
		if v, ok := readUint(filepath.Join(base, "memory.current")); ok {
			info.Memory.UsedBytes = v
		}
		if v, ok := readUint(filepath.Join(base, "memory.max")); ok {
			info.Memory.LimitBytes = v
		}
		if st := keyValues(filepath.Join(base, "cpu.stat")); st["usage_usec"] > 0 {
			info.CPU.UsageS = float64(st["usage_usec"]) / 1e6
		}
		if data, err := os.ReadFile(filepath.Join(base, "cpu.max")); err == nil {
			if f := strings.Fields(string(data)); len(f) == 2 && f[0] != "max" {
				q, _ := strconv.ParseFloat(f[0], 64)
				p, _ := strconv.ParseFloat(f[1], 64)
				if p > 0 {
					info.CPU.Limit = q / p
				}
			}
		}
		if v, ok := readUint(filepath.Join(base, "pids.current")); ok {
			info.Pids.Current = int(v)
		}
		if v, ok := readUint(filepath.Join(base, "pids.max")); ok {
			info.Pids.Limit = v
		}
	} else {
		if dir, ok := cg["memory"]; ok {
			base := filepath.Join(hierarchy("memory"), dir)
			if v, ok := readUint(filepath.Join(base, "memory.usage_in_bytes")); ok {
				info.Memory.UsedBytes = v
			}
			if v, ok := readUint(filepath.Join(base, "memory.limit_in_bytes")); ok && v < 1<<62 {
				info.Memory.LimitBytes = v
			}
		}
		if dir, ok := cg["cpuacct"]; ok {
			if v, ok := readUint(filepath.Join(hierarchy("cpuacct"), dir, "cpuacct.usage")); ok {
				info.CPU.UsageS = float64(v) / 1e9
			}
		}
		if dir, ok := cg["cpu"]; ok {
			base := filepath.Join(hierarchy("cpu"), dir)
			q, okq := readInt(filepath.Join(base, "cpu.cfs_quota_us"))
			p, okp := readInt(filepath.Join(base, "cpu.cfs_period_us"))
			if okq && okp && q > 0 && p > 0 {
				info.CPU.Limit = float64(q) / float64(p)
			}
		}
		if dir, ok := cg["pids"]; ok {
			base := filepath.Join(hierarchy("pids"), dir)
			if v, ok := readUint(filepath.Join(base, "pids.current")); ok {
				info.Pids.Current = int(v)
			}
			if v, ok := readUint(filepath.Join(base, "pids.max")); ok {
				info.Pids.Limit = v
			}
		}
	}
	if info.Pids.Current == 0 {
		info.Pids.Current = countPids()
	}
	var st unix.Statfs_t
	if err := unix.Statfs(workdir, &st); err == nil {
		bs := uint64(st.Bsize)
		info.Disk = api.DiskInfo{
			Path:       workdir,
			TotalBytes: st.Blocks * bs,
			FreeBytes:  st.Bavail * bs,
			UsedBytes:  (st.Blocks - st.Bfree) * bs,
		}
	}
	return info
}

// cgroupRoot is where the sandbox sees its cgroups (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

// selfCgroup lists the sandbox's cgroups (a variable for tests).
var selfCgroup = "/proc/self/cgroup"

// hierarchy returns the directory of the cgroup v1 hierarchy that holds
// controller ctrl: cgroupRoot/ctrl, or, where the host mounts controllers
// together ("cpu,cpuacct") and the sandbox's view has no per-controller
// link, the directory whose comma-separated name lists it.
func hierarchy(ctrl string) string {
	dir := filepath.Join(cgroupRoot, ctrl)
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return dir
	}
	for _, e := range entries {
		for _, c := range strings.Split(e.Name(), ",") {
			if c == ctrl {
				return filepath.Join(cgroupRoot, e.Name())
			}
		}
	}
	return dir
}

// cgroupPaths maps controller names ("" for the v2 hierarchy) to this
// process's cgroup path.
func cgroupPaths() map[string]string {
	out := map[string]string{}
	data, err := os.ReadFile(selfCgroup)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			// Only a pure v2 host has nothing but this line.
			if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
				out[""] = parts[2]
			}
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

func meminfo() map[string]uint64 {
	out := map[string]uint64{}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(fields[0], 10, 64)
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		out[k] = n
	}
	return out
}

func keyValues(path string) map[string]uint64 {
	out := map[string]uint64{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 2 {
			out[f[0]], _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	return out
}

func readUint(path string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

func readInt(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}

func countPids() int {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range d {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}
