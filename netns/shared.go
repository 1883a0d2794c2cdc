package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A bridge, its addresses and its nftables tables belong to a network
// namespace, not to an sbx root: every root (--root, HostConfig.Root) that
// attaches sandboxes to the same bridge in the same namespace must hand out
// addresses, veth names and rule keys from one set, or two roots give two
// sandboxes one address and remove each other's rules. So the lock and the
// leases live in a directory of the bridge, SharedDir/BRIDGE-NSID, shared
// by all roots; each lease names the root that owns it (Config.StateDir),
// and a root's pool, GC and Reset act only on its own leases while keeping
// what other live roots hold. The directory is removed with its last lease
// and made again by the next one.

// DefaultSharedDir is the default of Config.SharedDir.
const DefaultSharedDir = "/run/sbx/bridges"

// namespaceID names a network namespace for as long as the host is up:
// its cookie (SO_NETNS_COOKIE, never reused before a reboot), or on
// kernels without cookies its nsfs inode.
func namespaceID(nsFD int) (string, error) {
	var cookie uint64
	err := InNamespace(nsFD, func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		cookie = v
		return err
	})
	if err == nil {
		return "c" + strconv.FormatUint(cookie, 10), nil
	}
	var st unix.Stat_t
	if serr := unix.Fstat(nsFD, &st); serr != nil {
		return "", fmt.Errorf("identify the host network namespace: %w", errors.Join(err, serr))
	}
	return "i" + strconv.FormatUint(st.Ino, 10), nil
}

// SharedStateDir returns the directory where every sbx root that uses
// bridge in the network namespace at nsPath ("": the caller's) keeps the
// lock and the leases, under base (DefaultSharedDir if empty).
func SharedStateDir(base, nsPath, bridge string) (string, error) {
	if base == "" {
		base = DefaultSharedDir
	}
	if bridge == "" {
		bridge = DefaultBridgeName
	}
	if nsPath == "" {
		nsPath = "/proc/thread-self/ns/net"
	}
	f, err := os.Open(nsPath)
	if err != nil {
		return "", fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer f.Close()
	id, err := namespaceID(int(f.Fd()))
	if err != nil {
		return "", err
	}
	return sharedPath(base, bridge, id), nil
}

func sharedPath(base, bridge, id string) string { return filepath.Join(base, bridge+"-"+id) }

// stateLock is the exclusive lock over the network state shared by every sbx
// process and root (leases, ports, bridge and rule setup).
type stateLock struct {
	n *Network
	f *os.File
}

func (n *Network) lockPath() string { return filepath.Join(n.shared, "lock") }

// lock takes the shared lock. The lock file may be removed by the holder
// that removed the last lease (unlock); a lock taken on a file no longer
// at its path is given up and taken again.
func (n *Network) lock() (*stateLock, error) {
	for tries := 0; ; tries++ {
		if err := os.MkdirAll(n.shared, 0o700); err != nil {
			return nil, fmt.Errorf("create shared network state directory: %w", err)
		}
		f, err := os.OpenFile(n.lockPath(), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, os.ErrNotExist) && tries < 100 {
			continue // the directory went between MkdirAll and the open
		}
		if err != nil {
			return nil, fmt.Errorf("open network lock: %w", err)
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock network state: %w", err)
		}
		var held, cur unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(n.lockPath(), &cur) != nil || held.Ino != cur.Ino || held.Dev != cur.Dev {
			f.Close()
			if tries < 100 {
				continue
			}
			return nil, errors.New("lock network state: the lock file keeps being replaced")
		}
		if err := os.MkdirAll(n.leaseDir(), 0o700); err != nil {
			f.Close()
			return nil, fmt.Errorf("create lease directory: %w", err)
		}
		lk := &stateLock{n: n, f: f}
		n.adoptOwnLeases()
		return lk, nil
	}
}

// release releases the lock, with the shared directory left as it is: for
// a holder that removed no lease.
func (l *stateLock) release() { l.f.Close() }

// unlock releases the lock; if no lease is left, the shared directory goes
// first (the leases directory only if empty: rmdir is the check).
func (l *stateLock) unlock() {
	if os.Remove(l.n.leaseDir()) == nil {
		l.n.removeEgressLock()
		_ = os.Remove(l.n.lockPath())
		_ = os.Remove(l.n.shared)
	}
	l.f.Close()
}

// ownLeaseDir is where leases lived when each root kept its own, under
// Config.StateDir.
func (n *Network) ownLeaseDir() string { return filepath.Join(n.cfg.StateDir, "leases") }

// adoptOwnLeases moves the leases an older sbx kept under this root's state
// directory into the shared directory, marked as this root's. An address
// another root holds already stays where it is, with a warning: two roots
// gave it out, and the older sbx's duplicate cannot be repaired here. Call
// with the lock held.
func (n *Network) adoptOwnLeases() {
	ents, err := os.ReadDir(n.ownLeaseDir())
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		old := filepath.Join(n.ownLeaseDir(), name)
		if !strings.HasSuffix(name, ".json") {
			_ = os.Remove(old)
			continue
		}
		data, err := os.ReadFile(old)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(data, &l) == nil {
			l.Root = n.cfg.StateDir
			data, _ = json.Marshal(&l)
		}
		f, err := os.OpenFile(filepath.Join(n.leaseDir(), name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			n.log.Warn("a lease of this root's older state directory names an address another root holds; left in place", "lease", old, "err", err)
			continue
		}
		_, werr := f.Write(data)
		if err := errors.Join(werr, f.Close()); err != nil {
			_ = os.Remove(f.Name())
			continue
		}
		_ = os.Remove(old)
	}
	_ = os.Remove(n.ownLeaseDir()) // only if empty
}

// mine reports whether l belongs to this root.
func (n *Network) mine(l *lease) bool { return l.Root == n.cfg.StateDir }

// rootGone reports whether the root that owns l was deleted (its state
// directory is gone): nobody can remove its leases any more.
func rootGone(l *lease) bool {
	if l.Root == "" {
		return false
	}
	_, err := os.Stat(l.Root)
	return errors.Is(err, os.ErrNotExist)
}
