package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unlimitedMemory: v1 reports "no limit" as a page-rounded huge number;
// any limit at or above this is taken as none.
const unlimitedMemory = 1 << 62

// parentMemoryFile is the memory limit file of the parent cgroup.
func parentMemoryFile(mode Mode) (string, error) {
	switch mode {
	case ModeV2:
		return filepath.Join(Root, Parent(), "memory.max"), nil
	case ModeV1, ModeHybrid:
		return filepath.Join(Root, "memory", Parent(), "memory.limit_in_bytes"), nil
	}
	return "", errors.New("cgroups are not available on this host")
}

// ParentMemoryLimit returns the memory limit of the parent cgroup under
// which all sandboxes live (memory.limit_in_bytes on v1 and hybrid hosts,
// memory.max on v2), or 0 when it has none or does not exist yet.
func ParentMemoryLimit() (int64, error) {
	p, err := parentMemoryFile(DetectMode())
	if err != nil {
		return 0, err
	}
	data, err := readLimitFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the parent cgroup's memory limit: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the parent cgroup's memory limit: %s: bad value %q", p, s)
	}
	if n >= unlimitedMemory {
		return 0, nil
	}
	return int64(n), nil
}

// readLimitFile reads the small cgroup file path (a limit) with plain
// system calls: an os.File would stat it and register it with the
// runtime's poller (cgroup files can be polled) and unregister it again,
// which costs more than the read; a claim of a pool member with a memory
// limit reads the parent's limit on its path.
func readLimitFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 64) // a number of at most 20 digits, or "max"
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return buf[:n], nil
}

// SetParentMemory sets the memory limit of the parent cgroup, creating it
// if needed, so that the kernel holds all sandboxes together to bytes;
// 0 removes the limit. The kernel refuses a limit below what the
// sandboxes already use and cannot reclaim.
func SetParentMemory(bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("invalid parent memory limit %d", bytes)
	}
	mode := DetectMode()
	p, err := parentMemoryFile(mode)
	if err != nil {
		return err
	}
	if err := EnsureParent(Limits{}); err != nil {
		return err
	}
	v := strconv.FormatInt(bytes, 10)
	if bytes == 0 {
		v = "-1"
		if mode == ModeV2 {
			v = "max"
		}
	}
	if err := os.WriteFile(p, []byte(v), 0); err != nil {
		return fmt.Errorf("set the parent cgroup's memory limit to %s bytes (%s): %w", v, p, err)
	}
	return nil
}
