package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// DefaultDiskBytes caps the writable layer of a sandbox when no size is
// asked for, so that no sandbox can fill the host's memory through /.
const DefaultDiskBytes = 2 << 30

// Options configure the root filesystem of one sandbox.
type Options struct {
	// DiskBytes caps the writable layer (a tmpfs); 0 means DefaultDiskBytes.
	DiskBytes int64
	// DiskDir, if set, holds the writable layer on disk instead of a tmpfs
	// (made if missing, bound at the layer's place, not size-capped); the
	// caller removes it after Release.
	DiskDir string
	// Hostname, Hosts and ResolvConf are written to /etc/hostname,
	// /etc/hosts and /etc/resolv.conf in the writable layer.
	Hostname   string
	Hosts      string
	ResolvConf string
	// Dirs are created (mode 0755, or 01777 for tmp dirs) in the writable
	// layer where the image lacks them, e.g. the working directory, at
	// the paths the image's symlinks on the way lead to (a merged-usr
	// /bin/x is made as /usr/bin/x); their parents that the image has
	// keep their owners and modes. One that the Seed has as a file or a
	// symlink (or has one on its path) is left as the Seed has it.
	Dirs []string
	// MountDirs are sbx's own mount points (/.sbx): opaque directories of
	// the writable layer at the paths named, whatever the image has there
	// (its entries under them are hidden; a symlink on the way is hidden
	// under a directory, never followed), so the image can neither move
	// them nor put anything in them.
	MountDirs []string
	// UserNS, if set, prepares the root for a sandbox in that user
	// namespace: lower layers id-mapped, the writable layer its root's.
	UserNS *UserNS
	// Seed, if set, fills the empty writable layer (its upper directory)
	// before anything else is written to it and before the overlay is
	// mounted: a restore puts a checkpoint's layer back.
	Seed func(upper string) error
}

// Root is a prepared root filesystem. Dir holds everything it mounted;
// Release undoes it all.
type Root struct {
	Dir    string        // the sandbox's runtime directory
	Path   string        // the merged root to give to the container
	Mounts []specs.Mount // extra mounts the sandbox needs (host mode)
}

// Paths inside a sandbox runtime directory.
const (
	rwDir    = "rw"   // tmpfs with upper and work dirs
	rootDir  = "root" // overlay mount point
	etcDir   = "etc"  // host mode: overlay of the host's /etc
	lowerDir = "lower"
)

// Prepare mounts an overlay at dir/root: lowers (lowest first) read-only,
// with a writable layer on a size-capped tmpfs, so the lowers are never
// modified. dir must not exist or be empty; on error nothing is left.
func Prepare(dir string, lowers []string, o Options) (_ *Root, retErr error) {
	if len(lowers) == 0 {
		return nil, errors.New("rootfs: no lower layers")
	}
	for _, l := range lowers {
		fi, err := os.Stat(l)
		if err != nil {
			return nil, fmt.Errorf("root filesystem %s: %w", l, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("root filesystem %s is not a directory", l)
		}
	}
	// A directory the image has already keeps the image's owner and mode:
	// made again in the writable layer it would be root's 0755 on top.
	// sbx's own are made there now; the others once the overlay is
	// mounted, through it, so that their parents the image has keep
	// their owners and modes too (copied up, as by a write in the sandbox).
	dirs, err := missingDirs(lowers, o.Dirs, true)
	if err != nil {
		return nil, err
	}
	// sbx's own mount points are directories of the writable layer
	// whatever the image has at their paths, and opaque: the overlay
	// shows none of the image's entries under them (a directory's,
	// symlinks among them), so only sbx's own are there and nothing of
	// the image decides where libcontainer, which resolves their paths
	// in the root, binds sbx's files. A symlink on the way is hidden
	// under a directory, never followed.
	mountDirs := o.MountDirs
	o.Dirs, o.MountDirs = mountDirs, nil
	r, err := newRoot(dir, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = r.Release()
		}
	}()
	upper := filepath.Join(dir, rwDir, "upper")
	for _, d := range mountDirs {
		// The layer is fresh: nothing in it but what newRoot made.
		if err := unix.Lsetxattr(filepath.Join(upper, filepath.Clean("/"+d)), opaqueXattr, []byte("y"), 0); err != nil {
			return nil, fmt.Errorf("hide the image's %s in the writable layer: %w", d, err)
		}
	}
	if o.Seed != nil {
		if err := o.Seed(upper); err != nil {
			return nil, err
		}
	}
	if err := writeEtc(upper, "etc", o); err != nil {
		return nil, err
	}
	if o.UserNS != nil {
		mapped, err := idmapLowers(lowers, o.UserNS)
		if err != nil {
			return nil, err
		}
		defer mapped.close()
		lowers = mapped.paths
		// The writable layer is not id-mapped: what the sandbox writes is
		// stored with its host ids (commit maps them back).
		if err := chownTree(upper, o.UserNS.HostID); err != nil {
			return nil, fmt.Errorf("give the writable layer to the sandbox's root: %w", err)
		}
	}
	if err := mountOverlay(r.Path, lowers, upper, filepath.Join(dir, rwDir, "work")); err != nil {
		return nil, err
	}
	owner := 0
	if o.UserNS != nil {
		owner = int(o.UserNS.HostID)
	}
	for _, d := range dirs {
		err := mkdirThroughOverlay(r.Path, d, owner)
		if o.Seed != nil && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			// The seed (a restored sandbox's own layer) has a file or a
			// symlink on the path: the sandbox made it so, and keeps it,
			// as it kept it before its checkpoint.
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// newRoot creates the runtime directory with its tmpfs and writable layer.
func newRoot(dir string, o Options) (*Root, error) {
	size := o.DiskBytes
	if size == 0 {
		size = DefaultDiskBytes
	}
	if size < 1<<20 {
		return nil, fmt.Errorf("disk size %d is too small: use at least 1 MiB", size)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	r := &Root{Dir: dir, Path: filepath.Join(dir, rootDir)}
	rw := filepath.Join(dir, rwDir)
	for _, d := range []string{rw, r.Path} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = r.Release()
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := mountWritable(rw, o.DiskDir, size); err != nil {
		_ = r.Release()
		return nil, err
	}
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(rw, d), 0o755); err != nil {
			_ = r.Release()
			return nil, fmt.Errorf("create writable layer: %w", err)
		}
	}
	for _, d := range slices.Concat(o.Dirs, o.MountDirs) {
		if err := mkdirIn(filepath.Join(rw, "upper"), d); err != nil {
			_ = r.Release()
			return nil, err
		}
	}
	return r, nil
}

// mountWritable mounts the writable layer's file system at rw: a tmpfs of
// size bytes, or with diskDir that directory (0700), bound nosuid and
// nodev.
func mountWritable(rw, diskDir string, size int64) error {
	if diskDir == "" {
		if err := unix.Mount("tmpfs", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,size="+strconv.FormatInt(size, 10)); err != nil {
			return fmt.Errorf("mount writable layer: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(diskDir, 0o700); err != nil {
		return fmt.Errorf("make the writable layer's directory on disk: %w", err)
	}
	if err := unix.Mount(diskDir, rw, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the writable layer's directory on disk %s: %w", diskDir, err)
	}
	if err := unix.Mount("", rw, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the writable layer on disk nosuid and nodev: %w", err)
	}
	return nil
}

// mkdirThroughOverlay makes the in-sandbox directory p, which has no symlink on
// its path (missingDirs resolved them), in the mounted root root, one
// component at a time, refusing any symlink: a parent the image has is
// copied up by the overlay with its owner and mode; what is made is
// owner's (uid and gid), mode 0755 (01777 if p itself is named tmp), as
// mkdirIn's.
func mkdirThroughOverlay(root, p string, owner int) error {
	clean := filepath.Clean("/" + p)
	cur, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer func() { unix.Close(cur) }()
	parts := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	for i, c := range parts {
		if c == "" {
			continue
		}
		mode := uint32(0o755)
		if c == "tmp" && i == len(parts)-1 {
			mode = unix.S_ISVTX | 0o777
		}
		made := unix.Mkdirat(cur, c, 0o755) == nil
		// Opened for reading, not O_PATH: the owner and mode are set on
		// the directory opened, never again by name (fchmodat follows a
		// symlink that could have taken the name meanwhile).
		next, err := unix.Openat2(cur, c, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err == nil && made {
			err = errors.Join(unix.Fchown(next, owner, owner), unix.Fchmod(next, mode))
		}
		if err != nil {
			if next >= 0 {
				unix.Close(next)
			}
			return fmt.Errorf("create %s in the sandbox's root: %w", clean, err)
		}
		unix.Close(cur)
		cur = next
	}
	return nil
}

// mkdirIn creates the absolute in-sandbox path p inside the writable layer
// upper. The layer is fresh and sbx-created, so no component is a symlink.
func mkdirIn(upper, p string) error {
	clean := filepath.Clean("/" + p)
	if clean == "/" {
		return nil
	}
	full := filepath.Join(upper, clean)
	if err := os.MkdirAll(full, 0o755); err != nil {
		return fmt.Errorf("create %s in the writable layer: %w", clean, err)
	}
	if base := filepath.Base(clean); base == "tmp" {
		return os.Chmod(full, os.ModeSticky|0o777)
	}
	return nil
}

// writeEtc writes hostname, hosts and resolv.conf into the directory name
// of upper (the writable layer and its /etc; in host mode, rw and the
// upper layer of the /etc overlay), before the overlay is mounted, so the
// sandbox sees them in place of the image's (a file in the writable layer
// hides whatever a lower layer has at its path: a FIFO, a directory, a
// symlink).
//
// The layer is not always fresh: a restore seeds it with what a sandbox
// left in its own, so nothing in it is followed. /etc must be a directory
// of the layer (made when missing); an entry at one of the three names is
// removed and a new regular file made in its place, and one that is a
// directory is refused.
func writeEtc(upper, name string, o Options) error {
	hostname := ""
	if o.Hostname != "" {
		hostname = o.Hostname + "\n"
	}
	files := []struct{ name, content string }{
		{"hostname", hostname}, {"hosts", o.Hosts}, {"resolv.conf", o.ResolvConf},
	}
	if hostname == "" && o.Hosts == "" && o.ResolvConf == "" {
		return nil
	}
	up, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the writable layer: %w", err)
	}
	defer unix.Close(up)
	if err := unix.Mkdirat(up, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create /etc in the writable layer: %w", err)
	}
	etc, err := unix.Openat(up, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return errors.New("/etc in the writable layer is not a directory (a restored sandbox replaced it); sbx writes /etc/hostname, /etc/hosts and /etc/resolv.conf there")
	}
	if err != nil {
		return fmt.Errorf("open /etc in the writable layer: %w", err)
	}
	defer unix.Close(etc)
	for _, f := range files {
		if f.content == "" {
			continue
		}
		if err := unix.Unlinkat(etc, f.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			if errors.Is(err, unix.EISDIR) {
				return fmt.Errorf("/etc/%s in the writable layer is a directory (a restored sandbox made it); sbx writes a file there", f.name)
			}
			return fmt.Errorf("replace /etc/%s in the writable layer: %w", f.name, err)
		}
		fd, err := unix.Openat(etc, f.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("write /etc/%s: %w", f.name, err)
		}
		_, werr := unix.Write(fd, []byte(f.content))
		if cerr := unix.Close(fd); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write /etc/%s: %w", f.name, werr)
		}
	}
	return nil
}

// mountOverlay mounts an overlay at target. lowers are given lowest first.
// Up to a page of options goes through mount(2); deeper stacks use the
// new mount API, which takes each lower layer on its own ("lowerdir+",
// Linux 6.8 and later), so the number of layers is not bounded by the
// length of their paths.
//
// Every layer is given as /proc/self/fd/N of a descriptor opened here, so
// the mount's options, which every process in the sandbox can read in
// /proc/self/mountinfo, name no host path (state directories, image
// cache, run root).
func mountOverlay(target string, lowers []string, upper, work string) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	opaque := func(p string) (string, error) {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", fmt.Errorf("overlay layer %s: %w", p, err)
		}
		fds = append(fds, fd)
		return "/proc/self/fd/" + strconv.Itoa(fd), nil
	}
	var err error
	hidden := make([]string, len(lowers))
	for i, l := range lowers {
		if hidden[i], err = opaque(l); err != nil {
			return err
		}
	}
	if upper, err = opaque(upper); err != nil {
		return err
	}
	if work, err = opaque(work); err != nil {
		return err
	}
	lowers = hidden
	ordered := make([]string, len(lowers))
	for i, l := range lowers {
		ordered[len(lowers)-1-i] = escapeOverlay(l)
	}
	data := "lowerdir=" + strings.Join(ordered, ":") + ",upperdir=" + escapeOverlay(upper) + ",workdir=" + escapeOverlay(work)
	if len(data) >= unix.Getpagesize() {
		return mountOverlayFsconfig(target, lowers, upper, work)
	}
	if err := unix.Mount("overlay", target, "overlay", 0, data); err != nil {
		return fmt.Errorf("mount overlay at %s: %w (is the overlay module available?)", target, err)
	}
	return nil
}

// mountOverlayFsconfig mounts an overlay with fsopen/fsconfig/fsmount,
// adding the lower layers one by one, topmost first.
func mountOverlayFsconfig(target string, lowers []string, upper, work string) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("overlay of %d layers: fsopen: %w", len(lowers), err)
	}
	defer unix.Close(fsfd)
	for i := len(lowers) - 1; i >= 0; i-- {
		if err := unix.FsconfigSetString(fsfd, "lowerdir+", lowers[i]); err != nil {
			return fmt.Errorf("overlay of %d layers: this kernel takes at most a page of layer paths (lowerdir+ needs Linux 6.8): %w", len(lowers), err)
		}
	}
	if err := unix.FsconfigSetString(fsfd, "upperdir", upper); err != nil {
		return fmt.Errorf("overlay upperdir: %w", err)
	}
	if err := unix.FsconfigSetString(fsfd, "workdir", work); err != nil {
		return fmt.Errorf("overlay workdir: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fmt.Errorf("create overlay of %d layers: %w", len(lowers), err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move overlay to %s: %w", target, err)
	}
	return nil
}

// escapeOverlay escapes the characters overlayfs treats as separators.
func escapeOverlay(p string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`).Replace(p)
}

// Release unmounts everything under the sandbox's runtime directory and
// removes it. It is safe to call on a partial or already released root.
func (r *Root) Release() error { return Cleanup(r.Dir) }

// Cleanup unmounts every mount at or below dir and removes dir. sbx gc
// uses it for directories a crash left behind.
//
// The mounts are found by walking dir, not by reading the mount table:
// /proc/self/mountinfo lists every mount of the host (two per running
// sandbox), so reading it made each removal O(sandboxes on the host)
// (docs/bench.md, "How the time was found"). The walk never descends into a
// mount: each one is detached (with everything mounted below it) before
// its directory is looked into, and RemoveAll runs only once none is
// left, so nothing is ever removed through a mount.
func Cleanup(dir string) error {
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	if err := unmountUnder(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// maxStacked bounds the mounts detached from one path (mounts stacked on
// the same directory) before Cleanup gives up.
const maxStacked = 64

// unmountUnder detaches every mount at or below path, the walk's way.
func unmountUnder(path string) error {
	for i := 0; ; i++ {
		root, err := isMountRoot(path)
		if errors.Is(err, errNoMountRootAttr) {
			return unmountListed(path)
		}
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("unmount below %s: %w", path, err)
		}
		if !root {
			break
		}
		if i == maxStacked {
			return fmt.Errorf("unmount %s: still a mount point after %d unmounts", path, maxStacked)
		}
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return nil // gone, or a file (a file mount point was handled above)
	}
	entries, err := os.ReadDir(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed meanwhile (two removers of one run: gc and its owner)
	}
	if err != nil {
		return fmt.Errorf("unmount below %s: %w", path, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue // never followed; nothing can be mounted on one
		}
		if err := unmountUnder(filepath.Join(path, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errNoMountRootAttr says the kernel does not report STATX_ATTR_MOUNT_ROOT
// (before Linux 5.8).
var errNoMountRootAttr = errors.New("statx reports no mount roots")

// isMountRoot reports whether path (not followed if a symlink) is the root
// of a mount, i.e. a mount point.
func isMountRoot(path string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, 0, &st); err != nil {
		return false, err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, errNoMountRootAttr
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// unmountListed detaches the mounts at or below dir that the mount table
// lists, deepest first: the way of kernels without STATX_ATTR_MOUNT_ROOT.
func unmountListed(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Clean(dir)))
	if err != nil {
		return fmt.Errorf("list mounts below %s: %w", dir, err)
	}
	var errs []error
	// Later mounts sit on top of earlier ones; deeper paths inside them.
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i].Mountpoint
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// Resize changes the cap of the writable layer of the root prepared in dir
// (by Prepare or PrepareHost) while the sandbox runs: the tmpfs is
// remounted with the new size, which the sandbox's own mount of it shares.
// The kernel refuses a size below what the layer already holds.
func Resize(dir string, bytes int64) error {
	if bytes == 0 {
		bytes = DefaultDiskBytes
	}
	if bytes < 1<<20 {
		return fmt.Errorf("disk size %d is too small: use at least 1 MiB", bytes)
	}
	rw := filepath.Join(dir, rwDir)
	if err := unix.Mount("", rw, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(bytes, 10)); err != nil {
		return fmt.Errorf("resize the writable layer %s to %d bytes: %w", rw, bytes, err)
	}
	return nil
}
