package cgroup

import (
	"fmt"
	"math"

	ocg "github.com/opencontainers/cgroups"
)

// Update sets the limits of the running sandbox id in its cgroups: memory
// (with swap disabled where the host allows it), CPU quota and pids.
// Unlike at start, a zero limit is written as "unlimited", so Update can
// lift a limit as well as set one. The kernel refuses a memory limit below
// what the sandbox uses and cannot reclaim. Devices and the other
// controllers are left alone.
func Update(id string, l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	pids := int64(-1)
	r := &ocg.Resources{SkipDevices: true, Memory: -1, CpuQuota: -1, CpuPeriod: cpuPeriod, PidsLimit: &pids}
	if l.MemoryBytes > 0 {
		r.Memory = l.MemoryBytes
	}
	if SwapControllable() {
		r.MemorySwap = r.Memory // memory+swap equal to memory: no swap
	}
	if l.CPUs > 0 {
		r.CpuQuota = int64(math.Round(l.CPUs * cpuPeriod))
	}
	if l.Pids > 0 {
		pids = l.Pids
	}
	mgr, err := sandboxManager(id)
	if err != nil {
		return err
	}
	if err := mgr.Set(r); err != nil {
		return fmt.Errorf("set the cgroup limits of sandbox %s: %w", id, err)
	}
	return nil
}
