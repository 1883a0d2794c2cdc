package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/rootfs"
	"golang.org/x/sys/unix"
)

// containerRoot is libcontainer's state root, shared by long-lived
// sandboxes and one-shot runs so that isolate's cache of compiled seccomp
// filters (next to it) is too.
func (h *Host) containerRoot() string {
	return filepath.Join(h.store.RunRoot(), containersDir)
}

// cleanupDir unmounts anything left below dir and removes it. Unmounting
// first matters: removing through a still-mounted volume would delete host
// files.
func cleanupDir(dir string) error { return rootfs.Cleanup(dir) }

// releaseContainer kills the container id under stateRoot (thawing it if
// paused), destroys its libcontainer state and removes its cgroups. It
// copes with a container whose start was interrupted before libcontainer
// saved state: then the processes in its cgroups are killed.
func releaseContainer(ctx context.Context, stateRoot, id string) error {
	var errs []error
	if ctr, err := isolate.Load(stateRoot, id); err == nil {
		if err := killAndWait(ctx, ctr); err != nil {
			errs = append(errs, err)
		}
		// Processes may still be dying (a run whose lifeline just
		// closed): the cgroup must be empty, or libcontainer refuses to
		// destroy a running container.
		if err := cgroup.KillAll(ctx, id, killWait); err != nil {
			errs = append(errs, err)
		} else if err := ctr.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if paths := cgroup.SandboxLeftovers(id); len(paths) > 0 {
		if err := cgroup.KillAll(ctx, id, killWait); err != nil {
			errs = append(errs, err)
		}
		if err := cgroup.RemovePaths(paths); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(stateRoot, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killAndWait kills the container's PID 1 (its PID namespace goes with it)
// and waits until it is gone.
func killAndWait(ctx context.Context, ctr *isolate.Container) error {
	pid := ctr.Pid()
	if pid <= 0 || ctr.Status() == "stopped" {
		return nil
	}
	pidfd, perr := unix.PidfdOpen(pid, 0)
	if ctr.Status() == "paused" {
		_ = ctr.Resume()
	}
	if err := ctr.Kill(); err != nil {
		if perr == nil {
			_ = unix.Close(pidfd)
		}
		return err
	}
	if perr != nil {
		return nil // already gone
	}
	defer unix.Close(pidfd)
	return waitPidfd(ctx, pidfd, killWait)
}

// waitPidfd waits until the process behind pidfd exits, or for timeout.
func waitPidfd(ctx context.Context, pidfd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return fmt.Errorf("process did not exit within %s", timeout)
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for process exit: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// container loads the container of a sandbox.
func (h *Host) container(sb *sbx.Sandbox) (*isolate.Container, error) {
	ctr, err := isolate.Load(h.containerRoot(), sb.ID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s has no container (run sbx gc if it crashed): %w", sb.ShortID(), err)
	}
	return ctr, nil
}

// stopContainer sends sig, waits up to timeout, then SIGKILL.
func stopContainer(ctx context.Context, ctr *isolate.Container, sig unix.Signal, timeout time.Duration) error {
	pid := ctr.Pid()
	if pid <= 0 {
		return nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // already gone
	}
	defer unix.Close(pidfd)
	paused := ctr.Status() == "paused"
	if err := ctr.Signal(sig); err != nil {
		return err
	}
	if paused {
		_ = ctr.Resume() // let it handle the signal
	}
	if waitPidfd(ctx, pidfd, timeout) == nil {
		return nil
	}
	if err := ctr.Kill(); err != nil {
		return err
	}
	return waitPidfd(ctx, pidfd, killWait)
}
