package cgroup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	ocg "github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"
)

// sandboxManager opens the cgroups of sandbox id (all controllers).
func sandboxManager(id string) (ocg.Manager, error) {
	mgr, err := manager.New(&ocg.Cgroup{Path: SandboxPath(id), Resources: &ocg.Resources{}})
	if err != nil {
		return nil, fmt.Errorf("open cgroups of %s: %w", id, err)
	}
	return mgr, nil
}

// KillAll kills every process left in the cgroups of sandbox id (thawing
// them first) and waits up to wait until they are gone. It is the fallback
// for a container whose libcontainer state was never written: a create
// killed in the middle of starting it.
func KillAll(ctx context.Context, id string, wait time.Duration) error {
	mgr, err := sandboxManager(id)
	if err != nil {
		return err
	}
	_ = mgr.Freeze(ocg.Thawed)
	deadline := time.Now().Add(wait)
	for {
		pids, err := mgr.GetAllPids()
		if err != nil || len(pids) == 0 {
			return nil // gone, or no cgroup to read
		}
		for _, p := range pids {
			if err := unix.Kill(p, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("kill process %d of sandbox %s: %w", p, id, err)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("processes %v of sandbox %s survive SIGKILL", pids, id)
		}
		// Dying processes leave the cgroup within microseconds; this loop
		// only runs on the rare crash-recovery path.
		time.Sleep(5 * time.Millisecond)
	}
}

// Pids lists the host PIDs of every process in the cgroups of sandbox id,
// sorted.
func Pids(id string) ([]int, error) {
	mgr, err := sandboxManager(id)
	if err != nil {
		return nil, err
	}
	pids, err := mgr.GetAllPids()
	if err != nil {
		return nil, fmt.Errorf("list processes of %s: %w", id, err)
	}
	sort.Ints(pids)
	return pids, nil
}
