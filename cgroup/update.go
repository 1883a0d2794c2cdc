package cgroup

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	ocg "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// Update sets the limits of the running sandbox id in its cgroups: memory
// (with swap disabled where the host allows it), CPU quota and pids.
// Unlike at start, a zero limit is written as "unlimited", so Update can
// lift a limit as well as set one. The kernel refuses a memory limit below
// what the sandbox uses and cannot reclaim. Devices and the other
// controllers are left alone.
//
// On a v1 or hybrid host it writes the few limit files itself, in the
// order libcontainer's managers write them: building a manager reads the
// host's mount table and visits every hierarchy, about half a millisecond
// on the path of a pool member's claim. A v2 host goes through
// libcontainer's manager.
func Update(id string, l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	r := l.updateResources()
	if m := DetectMode(); m == ModeV1 || m == ModeHybrid {
		if err := updateV1(id, r); err != nil {
			return fmt.Errorf("set the cgroup limits of sandbox %s: %w", id, err)
		}
		return nil
	}
	return updateWithManager(id, r)
}

// updateResources are the resources Update writes for l: every limit,
// zero ones as unlimited.
func (l Limits) updateResources() *ocg.Resources {
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
	return r
}

// updateWithManager writes r into the cgroups of sandbox id with
// libcontainer's manager.
func updateWithManager(id string, r *ocg.Resources) error {
	mgr, err := sandboxManager(id)
	if err != nil {
		return err
	}
	if err := mgr.Set(r); err != nil {
		return fmt.Errorf("set the cgroup limits of sandbox %s: %w", id, err)
	}
	return nil
}

// updateV1 writes r's memory, swap, CPU quota and pids limits into the v1
// hierarchies of sandbox id.
func updateV1(id string, r *ocg.Resources) error {
	dir := func(controller string) string { return filepath.Join(Root, controller, SandboxPath(id)) }
	if err := setMemoryV1(dir("memory"), r.Memory, r.MemorySwap); err != nil {
		return err
	}
	// The period first, unless the kernel refuses it under the old quota
	// (EINVAL): then after the quota.
	cpu, period := dir("cpu"), strconv.FormatUint(r.CpuPeriod, 10)
	perr := ocg.WriteFile(cpu, "cpu.cfs_period_us", period)
	if perr != nil && !errors.Is(perr, unix.EINVAL) {
		return perr
	}
	if err := ocg.WriteFile(cpu, "cpu.cfs_quota_us", strconv.FormatInt(r.CpuQuota, 10)); err != nil {
		return err
	}
	if perr != nil {
		if err := ocg.WriteFile(cpu, "cpu.cfs_period_us", period); err != nil {
			return err
		}
	}
	val := "max"
	if *r.PidsLimit > 0 {
		val = strconv.FormatInt(*r.PidsLimit, 10)
	}
	return ocg.WriteFile(dir("pids"), "pids.max", val)
}

// setMemoryV1 sets memory.limit_in_bytes to mem and, if swap is not 0,
// memory.memsw.limit_in_bytes to swap (-1: unlimited), in the order the
// kernel accepts: memory+swap first when it grows past the current
// memory limit, as libcontainer does.
func setMemoryV1(dir string, mem, swap int64) error {
	setMem := func() error {
		err := ocg.WriteFile(dir, "memory.limit_in_bytes", strconv.FormatInt(mem, 10))
		if errors.Is(err, unix.EBUSY) {
			usage, _ := ocg.ReadFile(dir, "memory.usage_in_bytes")
			return fmt.Errorf("unable to set memory limit to %d (current usage: %s): %w", mem, strings.TrimSpace(usage), err)
		}
		return err
	}
	setSwap := func() error {
		if swap == 0 {
			return nil
		}
		return ocg.WriteFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(swap, 10))
	}
	if swap != 0 {
		cur, err := ocg.ReadFile(dir, "memory.limit_in_bytes")
		if err != nil {
			return err
		}
		curLimit, err := strconv.ParseUint(strings.TrimSpace(cur), 10, 64)
		if err != nil {
			return fmt.Errorf("read memory.limit_in_bytes: %w", err)
		}
		if swap == -1 || curLimit < uint64(swap) {
			if err := setSwap(); err != nil {
				return err
			}
			return setMem()
		}
	}
	if err := setMem(); err != nil {
		return err
	}
	return setSwap()
}
