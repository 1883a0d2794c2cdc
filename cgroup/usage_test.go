package cgroup

import (
	"testing"
	"time"

	ocg "github.com/opencontainers/cgroups"
)

// On v1 the user/system split comes from cpuacct.usage_all (nanoseconds
// per CPU), not from cpuacct.stat's 10 ms ticks.
func TestUsageFromPreciseCPUSplit(t *testing.T) {
	var st ocg.Stats
	st.CpuStats.CpuUsage = ocg.CpuUsage{
		TotalUsage:              17_300_000,
		UsageInUsermode:         0, // cpuacct.stat: under one tick
		UsageInKernelmode:       10_000_000,
		PercpuUsageInUsermode:   []uint64{1_200_000, 3_000_000},
		PercpuUsageInKernelmode: []uint64{9_000_000, 4_100_000},
	}
	u := UsageFrom(&st, nil)
	if u.UserTime != 4_200*time.Microsecond || u.SysTime != 13_100*time.Microsecond || u.CPUTime != 17_300*time.Microsecond {
		t.Fatalf("cpu %v user %v sys %v, want 17.3ms, 4.2ms, 13.1ms", u.CPUTime, u.UserTime, u.SysTime)
	}
	// Without per-CPU figures (v2: cpu.stat is in microseconds) the split
	// stays as libcontainer read it.
	st.CpuStats.CpuUsage.PercpuUsageInUsermode, st.CpuStats.CpuUsage.PercpuUsageInKernelmode = nil, nil
	st.CpuStats.CpuUsage.UsageInUsermode = 7_000_000
	if u := UsageFrom(&st, nil); u.UserTime != 7*time.Millisecond || u.SysTime != 10*time.Millisecond {
		t.Fatalf("user %v sys %v, want 7ms and 10ms", u.UserTime, u.SysTime)
	}
}
