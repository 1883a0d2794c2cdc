package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// Mounts made in a running sandbox (a warm pool's member being claimed)
// use the kernel's new mount API: each is a detached tree made on the
// host (open_tree of a host directory, or fsopen/fsmount of a tmpfs), its
// flags set with mount_setattr (read-only, nosuid, nodev; a tmpfs, and a
// bind asking for host ids, id-mapped to the sandbox's user namespace when
// it has its own), then moved into
// the sandbox's mount namespace with move_mount onto a mountpoint
// resolved inside its root. No path of the sandbox is ever followed on
// the host: mountpoints are made with in-root resolution (openat2
// RESOLVE_IN_ROOT), and the sandbox's own mounts die with its mount
// namespace, as those made at its start do.

// LiveMount is one mount made in a running sandbox.
type LiveMount struct {
	// Source is the host directory (or file) of a bind mount; empty for
	// a tmpfs.
	Source string
	// Target is the path inside the sandbox.
	Target string
	// ReadOnly makes the mount read-only.
	ReadOnly bool
	// SizeBytes caps a tmpfs; 0 is the kernel's default (half of RAM).
	SizeBytes int64
	// HostIDs id-maps a bind mount in a sandbox with a user namespace of
	// its own back onto the host's ids (host files of uid 0 show as the
	// sandbox's root, which writes as host uid 0). Without it a bind
	// shows host ids as they are: the sandbox's own are its range.
	HostIDs bool
}

// PrepareTargets creates the mountpoints of mounts inside the root
// directory root (a directory for a tmpfs or a directory's bind, an empty
// file for a file's), resolving each path inside root: a symlink in the
// root can never lead outside it. Call it where the root is mounted
// writable (a sandbox's own mount namespace: its read-only root is a bind
// in the container's).
func PrepareTargets(root string, mounts []LiveMount) error {
	rootDir, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer rootDir.Close()
	return PrepareTargetsIn(rootDir, mounts)
}

// PrepareTargetsIn is PrepareTargets in the root directory opened as root
// (a running sandbox's /proc/PID/root, where that is writable).
func PrepareTargetsIn(root *os.File, mounts []LiveMount) error {
	for _, m := range mounts {
		if err := prepareTarget(root, m); err != nil {
			return fmt.Errorf("mountpoint %s: %w", m.Target, err)
		}
	}
	return nil
}

func prepareTarget(root *os.File, m LiveMount) error {
	target := path.Clean("/" + m.Target)
	if target == "/" {
		return errors.New("cannot mount over the root")
	}
	dir := true
	if m.Source != "" {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("volume source: %w", err)
		}
		dir = fi.IsDir()
	}
	if dir {
		h, err := dirInRoot(root, target)
		if err != nil {
			return err
		}
		return h.Close()
	}
	parent, err := dirInRoot(root, path.Dir(target))
	if err != nil {
		return err
	}
	defer parent.Close()
	fd, err := unix.Openat(int(parent.Fd()), path.Base(target), unix.O_CREAT|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("create the file mountpoint: %w", err)
	}
	return unix.Close(fd)
}

// MountLive makes mounts in the running sandbox whose PID 1 the pidfd
// refers to. root is that process's root directory (its /proc/PID/root,
// opened while it was known to be alive); userns, if not -1, is a
// descriptor of its user namespace, to which tmpfs mounts and binds with
// HostIDs are id-mapped (host files of uid 0 show as the sandbox's root,
// as at create); other binds show host ids as they are. The
// mountpoints must exist (PrepareTargets). On error some of the mounts
// may have been made: the caller discards the sandbox.
func MountLive(pidfd int, root *os.File, userns int, mounts []LiveMount) error {
	d, err := DetachMounts(mounts, userns)
	if err != nil {
		return err
	}
	defer d.Close()
	return OnOwnThread(func() error { return d.MoveInto(pidfd, root, "") })
}

// Detached holds the detached trees of mounts made on the host, to be
// moved into a running sandbox (MoveInto).
type Detached struct {
	mounts []LiveMount
	trees  []int
}

// DetachMounts makes the detached trees of mounts on the host (call it
// from a goroutine in the host's mount namespace: sources are host
// paths), id-mapped to userns as MountLive says.
func DetachMounts(mounts []LiveMount, userns int) (*Detached, error) {
	d := &Detached{mounts: mounts, trees: make([]int, 0, len(mounts))}
	for _, m := range mounts {
		fd, err := detachedTree(m, userns)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("mount %s: %w", m.Target, err)
		}
		d.trees = append(d.trees, fd)
	}
	return d, nil
}

// Close releases the trees (those not moved into a sandbox go).
func (d *Detached) Close() {
	for _, fd := range d.trees {
		unix.Close(fd)
	}
	d.trees = nil
}

// MoveInto finds the mountpoints of the trees in root (the sandbox's root
// directory, as MountLive's), joins the mount namespace of the sandbox
// whose PID 1 pidfd refers to, and its UTS namespace too if hostname is
// not empty (one setns for both), sets the hostname and moves the trees
// onto their mountpoints. It leaves the calling thread in the sandbox's
// namespaces: call it from a goroutine locked to a thread that is never
// unlocked (OnOwnThread, Namespaces.Enter's fn, or a visit's, which goes
// back to the host's namespaces afterwards).
func (d *Detached) MoveInto(pidfd int, root *os.File, hostname string) error {
	targets := make([]*os.File, 0, len(d.mounts))
	defer func() {
		for _, f := range targets {
			f.Close()
		}
	}()
	for _, m := range d.mounts {
		t, err := pathInRoot(root, path.Clean("/"+m.Target))
		if err != nil {
			return fmt.Errorf("mount %s: find the mountpoint in the sandbox: %w", m.Target, err)
		}
		targets = append(targets, t)
	}
	// move_mount attaches only inside the caller's mount namespace.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare file system attributes: %w", err)
	}
	ns := unix.CLONE_NEWNS
	if hostname != "" {
		if len(hostname) > 64 {
			return fmt.Errorf("hostname %q: want 1 to 64 bytes", hostname)
		}
		ns |= unix.CLONE_NEWUTS
	}
	if err := unix.Setns(pidfd, ns); err != nil {
		return fmt.Errorf("join the sandbox's mount and UTS namespaces: %w", err)
	}
	if hostname != "" {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	for i, m := range d.mounts {
		err := unix.MoveMount(d.trees[i], "", int(targets[i].Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf("mount %s: move_mount: %w", m.Target, err)
		}
	}
	return nil
}

// OnOwnThread runs fn on an OS thread of its own that ends with it: fn
// may change the thread's namespaces.
func OnOwnThread(fn func() error) error { return onLockedThread(fn) }

// detachedTree makes the detached mount of m on the host: a recursive
// clone of the source directory or a new tmpfs, nosuid and nodev,
// read-only as asked; id-mapped to userns if it is not -1 and m is a
// tmpfs or asks for HostIDs.
func detachedTree(m LiveMount, userns int) (int, error) {
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if m.ReadOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	var fd int
	if m.Source != "" {
		var err error
		fd, err = unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return -1, fmt.Errorf("open_tree %s: %w", m.Source, err)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("mount_setattr: %w", err)
		}
	} else {
		var err error
		if fd, err = newTmpfs(m.SizeBytes, int(attr)); err != nil {
			return -1, err
		}
	}
	if userns >= 0 && (m.Source == "" || m.HostIDs) {
		err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)})
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("id-map to the sandbox's user namespace: %w", err)
		}
	}
	return fd, nil
}

// newTmpfs makes a detached tmpfs (mode 1777) with the mount attributes
// attr.
func newTmpfs(size int64, attr int) (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetString(fsfd, "mode", "1777"); err != nil {
		return -1, fmt.Errorf("tmpfs mode: %w", err)
	}
	if size > 0 {
		if err := unix.FsconfigSetString(fsfd, "size", strconv.FormatInt(size, 10)); err != nil {
			return -1, fmt.Errorf("tmpfs size %d: %w", size, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("create tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return -1, fmt.Errorf("fsmount tmpfs: %w", err)
	}
	return fd, nil
}

// RewriteEtc replaces /etc/hostname, /etc/hosts and /etc/resolv.conf (those
// o gives) in the mounted root directory root of a running sandbox,
// resolving every path inside it; each file keeps its inode, owner and
// mode, so binds of it see the new content. Call it where the root is
// mounted writable (the sandbox's own mount namespace).
func RewriteEtc(root string, o Options) error {
	rootDir, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer rootDir.Close()
	return RewriteEtcIn(rootDir, o)
}

// RewriteEtcIn is RewriteEtc in the root directory opened as rootDir (a
// running sandbox's /proc/PID/root, where that is writable). The root is
// the sandbox's and hostile, and the opens are the host's (root, any
// file mode): /etc and each file are resolved inside the root without
// crossing a mount (a volume or a bind there is refused, never written),
// and each file is first opened as a path only (O_PATH: no device's open
// runs, no FIFO's, no terminal becomes the host's controlling one) and
// opened for writing only if it is a regular file, or made if absent.
func RewriteEtcIn(rootDir *os.File, o Options) error {
	etc, err := dirInRoot(rootDir, "/etc")
	if err != nil {
		return fmt.Errorf("find /etc in the sandbox: %w", err)
	}
	defer etc.Close()
	if same, err := sameMount(rootDir, etc); err != nil {
		return fmt.Errorf("check /etc in the sandbox: %w", err)
	} else if !same {
		return errors.New("/etc in the sandbox is on a mount of its own (a volume or a bind): sbx rewrites /etc/hostname, hosts and resolv.conf only in the sandbox's root filesystem")
	}
	for _, f := range []struct{ name, content string }{
		{"hostname", o.Hostname + "\n"}, {"hosts", o.Hosts}, {"resolv.conf", o.ResolvConf},
	} {
		if f.content == "" || f.content == "\n" {
			continue
		}
		w, err := openEtcFile(etc, f.name)
		if err != nil {
			return fmt.Errorf("open /etc/%s in the sandbox: %w", f.name, err)
		}
		_, werr := w.Write([]byte(f.content))
		if cerr := w.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write /etc/%s: %w", f.name, werr)
		}
	}
	return nil
}

// etcFileHow resolves a file name in /etc without following a symlink or
// crossing a mount; a symlink itself is opened (O_PATH|O_NOFOLLOW) and
// then refused.
var etcFileHow = unix.OpenHow{
	Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
}

// openEtcFile opens name in etc for writing, truncated: made (0644) if
// absent; opened, through its O_PATH descriptor, only if it is a regular
// file on etc's mount.
func openEtcFile(etc *os.File, name string) (*os.File, error) {
	const wflags = unix.O_WRONLY | unix.O_NOCTTY | unix.O_NONBLOCK | unix.O_CLOEXEC
	pfd, err := unix.Openat2(int(etc.Fd()), name, &etcFileHow)
	if errors.Is(err, unix.ENOENT) {
		fd, err := unix.Openat(int(etc.Fd()), name, wflags|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("it is not a regular file")
	}
	return os.OpenFile("/proc/self/fd/"+strconv.Itoa(pfd), wflags|unix.O_TRUNC, 0)
}

// sameMount reports whether a and b are on the same mount.
func sameMount(a, b *os.File) (bool, error) {
	var sa, sb unix.Statx_t
	for _, x := range []struct {
		f  *os.File
		st *unix.Statx_t
	}{{a, &sa}, {b, &sb}} {
		if err := unix.Statx(int(x.f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, x.st); err != nil {
			return false, err
		}
		if x.st.Mask&unix.STATX_MNT_ID == 0 {
			return false, errors.New("the kernel gives no mount ids (statx STATX_MNT_ID, Linux 5.8)")
		}
	}
	return sa.Mnt_id == sb.Mnt_id, nil
}

// inRoot resolves paths inside a root directory, as pathrs does, in one
// openat2 (RESOLVE_IN_ROOT): pathrs' own checks of each component cost
// about a tenth of a millisecond per path, on the path of a claim.
var inRoot = unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}

// pathInRoot opens p (O_PATH) resolved inside root: openat2 first, pathrs
// where that fails (a kernel without it, a rename racing the lookup).
func pathInRoot(root *os.File, p string) (*os.File, error) {
	if fd, err := unix.Openat2(int(root.Fd()), p, &inRoot); err == nil {
		return os.NewFile(uintptr(fd), p), nil
	}
	return pathrs.OpenatInRoot(root, p)
}

// dirInRoot opens the directory p (O_PATH) resolved inside root, making
// it and its parents (mode 0755) if they do not exist: a missing last
// component is made with one mkdirat in its parent, resolved inside root;
// anything else goes to pathrs.
func dirInRoot(root *os.File, p string) (*os.File, error) {
	how := inRoot
	how.Flags |= unix.O_DIRECTORY
	fd, err := unix.Openat2(int(root.Fd()), p, &how)
	if err == nil {
		return os.NewFile(uintptr(fd), p), nil
	}
	if errors.Is(err, unix.ENOENT) {
		if f, err := mkdirInRoot(root, p, &how); err == nil {
			return f, nil
		}
	}
	return pathrs.MkdirAllHandle(root, p, 0o755)
}

// mkdirInRoot makes the directory p, whose parent exists, inside root and
// opens it, refusing to follow anything that replaced it meanwhile.
func mkdirInRoot(root *os.File, p string, how *unix.OpenHow) (*os.File, error) {
	dir, base := path.Split(path.Clean("/" + p))
	if base == "" || base == "." || base == ".." {
		return nil, unix.EINVAL
	}
	parent, err := unix.Openat2(int(root.Fd()), dir, how)
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	fd, err := unix.Openat2(parent, base, &unix.OpenHow{Flags: how.Flags | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}
