package netns

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// leaseState is where a lease is in its life.
type leaseState string

const (
	// statePreparing: recorded before the namespace and veth are made. Seen
	// by GC (which holds the lock, so nobody is still building) it is debris.
	statePreparing leaseState = "preparing"
	// statePrepared: a ready namespace waiting in the pool.
	statePrepared leaseState = "pooled"
	// stateAttaching: claimed by a sandbox, rules being installed.
	stateAttaching leaseState = "attaching"
	// stateAttached: in use by Owner.
	stateAttached leaseState = "attached"
)

// lease is the on-disk record of one bridged namespace: its address, veth,
// namespace mount and, once attached, the sandbox and its settings. The file
// is named after the address, so creating it with O_EXCL reserves the address.
type lease struct {
	Key string `json:"key"`
	// Root is the state directory (Config.StateDir) of the sbx root that
	// owns the lease: the lease directory is shared by every root that
	// uses the bridge (shared.go).
	Root           string        `json:"root,omitempty"`
	IP             netip.Addr    `json:"ip"`
	HostVeth       string        `json:"host_veth"`
	NetNSPath      string        `json:"netns_path"`
	State          leaseState    `json:"state"`
	Owner          string        `json:"owner,omitempty"`
	Ports          []PortMapping `json:"ports,omitempty"`
	Egress         EgressPolicy  `json:"egress"`
	AllowHostPorts []HostPort    `json:"allow_host_ports,omitempty"`
	DNS            []netip.Addr  `json:"dns,omitempty"`
	Hostname       string        `json:"hostname,omitempty"`
	// Holder holds the published ports' sockets (hold.go).
	Holder *holder `json:"holder,omitempty"`
}

func newKey() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (n *Network) leaseDir() string { return filepath.Join(n.shared, "leases") }

func (n *Network) leasePath(ip netip.Addr) string {
	return filepath.Join(n.leaseDir(), ip.String()+".json")
}

// reserveLease creates the lease file for the first free address of the
// subnet (after the gateway) with O_EXCL.
func (n *Network) reserveLease(l *lease) error {
	sub := n.subnet
	last := lastAddr(sub)
	for ip := n.gateway.Next(); ip.IsValid() && ip.Less(last); ip = ip.Next() {
		f, err := os.OpenFile(n.leasePath(ip), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create lease for %s: %w", ip, err)
		}
		l.IP = ip
		data, _ := json.Marshal(l)
		_, werr := f.Write(data)
		cerr := f.Close()
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(n.leasePath(ip))
			return fmt.Errorf("write lease for %s: %w", ip, err)
		}
		return nil
	}
	return fmt.Errorf("no free address left in %s; remove sandboxes or run sbx gc", sub)
}

// writeLease replaces a lease file atomically.
func (n *Network) writeLease(l *lease) error {
	old, err := n.putLease(l)
	if old != "" {
		_ = os.Remove(old)
	}
	return err
}

// putLease is writeLease leaving the old lease file at the returned path
// (also on error: what is left of the new one), for the caller to remove:
// an unlink a caller in a hurry does after. The new lease is written into
// the lease's spare file (makeSpare) when it has an empty one, else into a
// new file at the staged path, and swapped in (commitLease).
func (n *Network) putLease(l *lease) (string, error) {
	data, err := json.Marshal(l)
	if err != nil {
		return "", err
	}
	staged := n.sparePath(l)
	if !fillSpare(staged, data) {
		staged = n.stagedPath(l)
		if err := os.WriteFile(staged, data, 0o600); err != nil {
			return staged, fmt.Errorf("write lease %s: %w", l.IP, err)
		}
	}
	return staged, n.commitLease(l, staged)
}

// stagedPath is where a lease's next content is written before it is put
// in place when the lease has no spare. Readers take only names ending in
// .json for leases; one that holds the lock removes what a writer that
// died left there.
func (n *Network) stagedPath(l *lease) string { return n.leasePath(l.IP) + ".tmp" }

// A claim writes its member's lease on its critical path, and a new file
// costs a disk file system (ext4, where /run may live) an inode and its
// journal: 0.2 to 0.3 ms on a busy host, where filling an empty file made
// before costs about 0.03 ms. So a pool member's lease gets an empty spare
// file when the member is attached (makeSpare), which the claim's write
// fills and swaps in; the old lease left in its place stays there (removing
// a file costs as much), never read again. A spare that is not empty (the
// old lease, or a write a crash left) is never used, and a lease's spares
// go with it (removeLease).

// sparePath is the spare file of l's lease.
func (n *Network) sparePath(l *lease) string { return n.leasePath(l.IP) + ".spare" }

// makeSpare makes the empty spare file that l's next write fills.
func (n *Network) makeSpare(l *lease) error {
	f, err := os.OpenFile(n.sparePath(l), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("spare of lease %s: %w", l.IP, err)
	}
	return f.Close()
}

// fillSpare writes data into the spare file at path if it is an empty
// regular file, and reports whether it did.
func fillSpare(path string, data []byte) bool {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 {
		return false
	}
	m, err := unix.Write(fd, data)
	return err == nil && m == len(data)
}

// commitLease puts the file staged (l's next content) in place of l's
// lease, atomically for readers, and leaves the old one at staged. The
// files are swapped, not one renamed over the other: ext4 flushes a file
// renamed over another (auto_da_alloc), which waits for the disk when it
// is busy (see swapfile.Replace). A file system that cannot swap renames.
func (n *Network) commitLease(l *lease, staged string) error {
	p := n.leasePath(l.IP)
	err := unix.Renameat2(unix.AT_FDCWD, staged, unix.AT_FDCWD, p, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		err = os.Rename(staged, p)
	}
	if err != nil {
		return fmt.Errorf("write lease %s: %w", l.IP, err)
	}
	return nil
}

// removeLease removes l's lease file, its spare first.
func (n *Network) removeLease(l *lease) error {
	for _, p := range []string{n.sparePath(l), n.leasePath(l.IP)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove lease %s: %w", l.IP, err)
		}
	}
	return nil
}

// readLeases returns every lease on disk. Unreadable files are returned as
// leases with only IP set and State empty, so GC can remove them.
func (n *Network) readLeases() ([]*lease, error) { return n.readLeasesMatching(nil) }

// readLeasesMatching is readLeases for the leases whose file's content
// match says may be wanted (nil: all); the others, and unreadable files,
// are neither decoded nor returned.
func (n *Network) readLeasesMatching(match func(data []byte) bool) ([]*lease, error) {
	dir, err := os.Open(n.leaseDir())
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	slices.Sort(names)
	var out []*lease
	prev := ""
	for _, e := range names {
		name, ok := strings.CutSuffix(e, ".json")
		if !ok {
			// What a writer that died left staged, and a spare whose
			// lease is gone (sorted, a lease comes right before its spare).
			if spare, isSpare := strings.CutSuffix(e, ".spare"); strings.HasSuffix(e, ".tmp") || isSpare && spare != prev {
				_ = unix.Unlinkat(int(dir.Fd()), e, 0)
			}
			continue
		}
		prev = e
		ip, err := netip.ParseAddr(name)
		if err != nil {
			continue
		}
		l := &lease{IP: ip}
		data, err := readSmallFile(int(dir.Fd()), e)
		if match != nil && (err != nil || !match(data)) {
			continue
		}
		if err == nil {
			if json.Unmarshal(data, l) != nil || l.IP != ip {
				l = &lease{IP: ip}
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// readSmallFile reads the file name of directory dirFD (a lease: a few
// hundred bytes) with an open, as few reads as it takes and a close.
func readSmallFile(dirFD int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if n < len(buf) {
			// A short read of a regular file is its end: no second
			// read to see it.
			return buf[:n], nil
		}
		buf = append(buf, make([]byte, len(buf))...)
	}
}

func (n *Network) findLease(sandboxID string, anyState bool) (*lease, error) {
	ls, err := n.readLeases()
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if n.mine(l) && l.Owner == sandboxID && (anyState || l.State == stateAttached || l.State == stateAttaching) {
			return l, nil
		}
	}
	return nil, nil
}

// sweepDebris tears down the leases of operations that died midway (state
// preparing or attaching, or unreadable), and those of deleted roots, and
// returns the others. Call it with the lock held: every prepare and attach
// holds the lock from its first write to its last, so a lease seen in those
// states by the lock's holder is no live process's work.
func (n *Network) sweepDebris(ls []*lease) []*lease {
	var keep []*lease
	for _, l := range ls {
		if l.State != statePreparing && l.State != stateAttaching && l.State != "" && !rootGone(l) {
			keep = append(keep, l)
			continue
		}
		if err := n.teardown(l); err != nil {
			n.log.Warn("remove the network of an interrupted operation", "ip", l.IP, "owner", l.Owner, "err", err)
			keep = append(keep, l)
			continue
		}
		n.log.Info("removed the network of an interrupted operation", "ip", l.IP, "state", l.State, "owner", l.Owner)
	}
	return keep
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	bits := p.Bits()
	for i := 0; i < 4; i++ {
		for b := 0; b < 8; b++ {
			if i*8+b >= bits {
				a[i] |= 0x80 >> b
			}
		}
	}
	return netip.AddrFrom4(a)
}
