package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/version"
)

// Machine describes the host a report was measured on.
type Machine struct {
	Kernel      string `json:"kernel"`
	CPUModel    string `json:"cpu_model"`
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memory_bytes"`
	CgroupMode  string `json:"cgroup_mode"`
	GoVersion   string `json:"go_version"`
	SbxVersion  string `json:"sbx_version"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages when the run started and ended.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end,omitempty"`
	// BusyBefore is the share of all CPUs busy during one second before
	// the run (other work on the host), 0 to 1.
	BusyBefore float64 `json:"busy_before"`
}

// DescribeMachine reads the host's description; it samples CPU use for
// busyWindow before returning (zero skips that).
func DescribeMachine(busyWindow time.Duration) Machine {
	m := Machine{
		CPUs:       runtime.NumCPU(),
		CgroupMode: string(cgroup.DetectMode()),
		GoVersion:  runtime.Version(),
		SbxVersion: SbxVersion(),
		LoadStart:  LoadAvg(),
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	if busyWindow > 0 {
		b0, t0 := cpuTimes()
		time.Sleep(busyWindow)
		b1, t1 := cpuTimes()
		if t1 > t0 {
			m.BusyBefore = float64(b1-b0) / float64(t1-t0)
		}
	}
	return m
}

// LoadAvg returns the 1, 5 and 15 minute load averages, e.g. "1.20 0.90 0.75".
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuTimes returns busy and total jiffies of all CPUs from /proc/stat.
func cpuTimes() (busy, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest time is already counted in user time
			break
		}
		v, _ := strconv.ParseUint(s, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// SbxVersion is the version of the sbx code in this process.
func SbxVersion() string {
	return "sbx " + version.Version + " (commit " + version.Commit + ")"
}
