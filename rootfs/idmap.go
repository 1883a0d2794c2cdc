package rootfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// UserNS shows a root to a sandbox in a user namespace: NS is the
// namespace (an nsfs file, see package userns) whose root is host id
// HostID.
type UserNS struct {
	NS     *os.File
	HostID uint32
}

// idmappedLowers are the lower layers as id-mapped, read-only clones that
// are mounted nowhere (detached trees, open_tree): the overlay takes them by
// their descriptors' paths and keeps its own clones, so there is nothing to
// unmount or remove at teardown.
type idmappedLowers struct {
	paths []string // /proc/self/fd/N of each clone, lowest first
	fds   []int
}

// close lets go of the clones (the overlay made from them keeps its own).
func (l *idmappedLowers) close() {
	for _, fd := range l.fds {
		unix.Close(fd)
	}
	l.fds = nil
}

// idmapLowers gives each lower layer as an id-mapped, read-only detached
// clone, so that the files the host owns as uid 0 show as the sandbox's
// root (host id HostID) and no layer is copied or chowned. The overlay
// itself cannot be id-mapped (the kernel refuses), its layers can.
func idmapLowers(lowers []string, u *UserNS) (_ *idmappedLowers, retErr error) {
	out := &idmappedLowers{}
	defer func() {
		if retErr != nil {
			out.close()
		}
	}()
	for _, l := range lowers {
		fd, err := idmapClone(l, u.NS)
		if err != nil {
			return nil, err
		}
		out.fds = append(out.fds, fd)
		out.paths = append(out.paths, "/proc/self/fd/"+strconv.Itoa(fd))
	}
	return out, nil
}

// idmapClone returns a detached read-only clone of the mount of src,
// id-mapped through the user namespace ns.
func idmapClone(src string, ns *os.File) (int, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("clone a mount of %s: %w", src, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("id-map %s for the sandbox's user namespace: %w (its file system must support id-mapped mounts, Linux 5.12+)", src, err)
	}
	return tree, nil
}

// chownTree gives everything under dir (not following symlinks) to the
// sandbox's root: the writable layer's directories and /etc files that
// sbx made before the sandbox starts.
func chownTree(dir string, id uint32) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(id), int(id))
	})
}

// ParentsTraversable fails, saying what to do, if other users cannot
// traverse a directory above runRoot: the root of a user namespace reaches
// its root file system by a path below runRoot (ReachableBy), and cannot
// get past such a directory.
func ParentsTraversable(runRoot string) error {
	for d := filepath.Dir(filepath.Clean(runRoot)); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return fmt.Errorf("check that user namespaces can reach the run root: %w", err)
		}
		if st.Mode&0o001 == 0 {
			return fmt.Errorf("%s is not traversable by other users (mode %o), which user namespaces need: chmod o+x %s", d, st.Mode&0o7777, d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// ReachableBy lets the root of a user namespace (host id) reach path, a
// directory inside sandboxDir: libcontainer's init, already in the
// namespace, opens the root file system by its host path, and the
// namespace's root has no power over directories the host's root owns.
// sandboxDir and every directory down to path are given to the sandbox's
// root (their modes stay 0700: other host users still cannot enter);
// directories from runRoot down to sandboxDir's parent, shared by all
// sandboxes, become traversable (o+x, not readable); those above runRoot
// must be traversable already.
func ReachableBy(runRoot, sandboxDir, path string, hostID uint32) error {
	runRoot, sandboxDir, path = filepath.Clean(runRoot), filepath.Clean(sandboxDir), filepath.Clean(path)
	rel, err := filepath.Rel(sandboxDir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not inside %s", path, sandboxDir)
	}
	if up, err := filepath.Rel(runRoot, sandboxDir); err != nil || up == "." || strings.HasPrefix(up, "..") {
		return fmt.Errorf("%s is not below %s", sandboxDir, runRoot)
	}
	for d := filepath.Dir(sandboxDir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return err
		}
		inside := d == runRoot || strings.HasPrefix(d, runRoot+"/")
		if st.Mode&0o001 == 0 {
			if !inside {
				return fmt.Errorf("%s is not traversable by other users (mode %o), which user namespaces need: chmod o+x %s", d, st.Mode&0o7777, d)
			}
			if err := unix.Chmod(d, (st.Mode&0o7777)|0o001); err != nil {
				return err
			}
		}
		if d == "/" || d == "." {
			break
		}
	}
	cur := sandboxDir
	for _, c := range append([]string{"."}, strings.Split(rel, string(filepath.Separator))...) {
		cur = filepath.Join(cur, c)
		if err := os.Lchown(cur, int(hostID), int(hostID)); err != nil {
			return fmt.Errorf("give %s to the sandbox's root: %w", cur, err)
		}
	}
	return nil
}
