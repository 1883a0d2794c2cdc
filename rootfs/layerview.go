package rootfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// opaqueXattr marks a layer's directory that hides what the layers below
// it have at its path (an image layer's ".wh..wh..opq").
const opaqueXattr = "trusted.overlay.opaque"

// maxSymlinkHops bounds the symlinks one path lookup follows, as the
// kernel's ELOOP does.
const maxSymlinkHops = 40

// errPathTooLong is a path that, with the image's symlinks followed, is
// longer than a path may be (PATH_MAX): a few symlinks whose targets
// each add thousands of components would otherwise have tens of
// thousands of nested directories made.
var errPathTooLong = fmt.Errorf("with the image's symlinks followed it is longer than %d bytes: %w", unix.PathMax-1, unix.ENAMETOOLONG)

// layerView looks up in-sandbox paths in image layers (lowest first) as
// the overlay over them will show them, before it is mounted: the topmost
// layer with an entry at a path decides; a directory merges with the
// directories below it down to a layer with a non-directory there or down
// to an opaque one; a whiteout (a 0/0 character device) hides the path.
//
// Image layers are hostile: each layer is looked at alone, with
// openat2(RESOLVE_IN_ROOT) and no symlink of its own followed (a layer's
// directory may be a symlink that a higher layer hides under a directory),
// so nothing outside the layers is ever looked at. Symlinks are followed
// in the merged view, as the kernel will follow them in the sandbox.
type layerView struct {
	lowers []string
	fds    []int // each layer's directory, opened on first use; -1 until then
}

func newLayerView(lowers []string) *layerView {
	fds := make([]int, len(lowers))
	for i := range fds {
		fds[i] = -1
	}
	return &layerView{lowers: lowers, fds: fds}
}

func (v *layerView) close() {
	for _, fd := range v.fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// layerFD is layer i's directory, opened O_PATH.
func (v *layerView) layerFD(i int) (int, error) {
	if v.fds[i] < 0 {
		fd, err := unix.Open(v.lowers[i], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		v.fds[i] = fd
	}
	return v.fds[i], nil
}

// entryKind is what a merged view has at a path.
type entryKind int

const (
	entryMissing entryKind = iota // nothing, or a whiteout
	entryDir
	entrySymlink
	entryFile // anything else: a regular file, a device, a FIFO, a socket
)

// viewEntry is a merged view's entry at one path.
type viewEntry struct {
	kind   entryKind
	layers []int  // a directory: the layers merged into it, topmost first
	target string // a symlink: what it names
}

// lookup is the entry at the in-sandbox path p (no symlink on the way)
// that the layers of the directory holding it (topmost first) merge.
func (v *layerView) lookup(layers []int, p string) (viewEntry, error) {
	rel := strings.TrimLeft(p, "/")
	var e viewEntry
	for _, i := range layers {
		dir, err := v.layerFD(i)
		if err != nil {
			return e, err
		}
		st, opaque, target, err := entryInLayer(dir, rel)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return e, err
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if len(e.layers) == 0 {
			switch {
			case isDir:
				e.kind = entryDir
			case st.Mode&unix.S_IFMT == unix.S_IFLNK:
				return viewEntry{kind: entrySymlink, target: target}, nil
			case st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0:
				return viewEntry{kind: entryMissing}, nil
			default:
				return viewEntry{kind: entryFile}, nil
			}
		}
		if !isDir {
			break // the lower stack ends at a non-directory
		}
		e.layers = append(e.layers, i)
		if opaque {
			break
		}
	}
	return e, nil
}

// entryInLayer looks at the path rel inside the layer directory dir,
// refusing any symlink on the way to it (the last component may be one:
// it is what is looked at): its lstat, whether it is an opaque directory,
// and a symlink's target. A directory is opened to read its xattr (one
// that cannot be read is taken as not opaque); nothing else is opened but
// O_PATH, so a FIFO or a device is never opened.
func entryInLayer(dir int, rel string) (st unix.Stat_t, opaque bool, target string, err error) {
	if rel == "" {
		rel = "."
	}
	resolve := uint64(unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve})
	if err == nil {
		defer unix.Close(fd)
		if err := unix.Fstat(fd, &st); err != nil {
			return st, false, "", err
		}
		var b [1]byte
		n, xerr := unix.Fgetxattr(fd, opaqueXattr, b[:])
		return st, xerr == nil && n == 1 && b[0] == 'y', "", nil
	}
	if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EACCES) {
		return st, false, "", err
	}
	fd, err = unix.Openat2(dir, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return st, false, "", err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, false, "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return st, false, "", err
		}
		target = string(buf[:n])
	}
	return st, false, target, nil
}

// resolution is where an in-sandbox path leads in a layer view.
type resolution struct {
	path string    // the path with every symlink replaced by what it names
	kind entryKind // entryDir, entryMissing, or entryFile when file is set
	file string    // the first file on the way (or a symlink looping)
}

// resolve follows the in-sandbox path p in the view, symlinks and ".."
// as the kernel follows them. A component missing is taken as an empty
// directory, so path is where a directory p would have to be made.
// Without follow, a symlink on the way is taken as missing (path is then
// p, cleaned): the directory is to be made over it.
func (v *layerView) resolve(p string, follow bool) (resolution, error) {
	type frame struct {
		path   string
		layers []int
	}
	all := make([]int, len(v.lowers))
	for i := range all {
		all[i] = len(all) - 1 - i
	}
	stack := []frame{{"/", all}}
	rest := strings.Split(p, "/")
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		top := stack[len(stack)-1]
		next := strings.TrimSuffix(top.path, "/") + "/" + c
		if len(next) >= unix.PathMax {
			return resolution{}, errPathTooLong
		}
		e, err := v.lookup(top.layers, next)
		if err != nil {
			return resolution{}, err
		}
		switch e.kind {
		case entryDir, entryMissing:
			stack = append(stack, frame{next, e.layers})
		case entrySymlink:
			if !follow {
				return resolution{path: filepath.Clean("/" + p), kind: entryMissing}, nil
			}
			if hops++; hops > maxSymlinkHops {
				return resolution{path: next, kind: entryFile, file: next}, nil
			}
			if strings.HasPrefix(e.target, "/") {
				stack = stack[:1]
			}
			rest = append(strings.Split(e.target, "/"), rest...)
		default:
			return resolution{path: next, kind: entryFile, file: next}, nil
		}
	}
	top := stack[len(stack)-1]
	if len(top.layers) == 0 {
		return resolution{path: top.path, kind: entryMissing}, nil
	}
	return resolution{path: top.path, kind: entryDir}, nil
}

// FileOnPath returns the path of the first file (not a directory: a
// regular file, a device, a FIFO, a socket, a symlink loop) on the
// in-sandbox directory path p, symlinks followed, as the layers lowers
// (lowest first) stack up, or "" if there is none: making p in the
// writable layer would hide that file, or the symlink to it, under a
// directory. A path missing (or whited out) from some component on is
// not a file. It fails on a layer that cannot be read and on a path
// longer than PATH_MAX once symlinks are followed (ENAMETOOLONG).
func FileOnPath(lowers []string, p string) (string, error) {
	v := newLayerView(lowers)
	defer v.close()
	r, err := v.resolve(p, true)
	if err != nil {
		return "", err
	}
	return r.file, nil
}

// missingDirs are the in-sandbox directories of dirs that the layers
// (lowest first) do not already have, each as the path to make in the
// writable layer. With follow, symlinks on the way are followed in the
// layers, so a directory under a symlink to a directory (a merged-usr
// /bin) is made where it points, and the symlink is not hidden under a
// new directory; without, a symlink on the way makes the directory
// missing, to be made as named, over the symlink. A path with a file on
// the way is kept as it is (a caller refuses a working directory like
// that first). It fails as FileOnPath does.
func missingDirs(lowers, dirs []string, follow bool) ([]string, error) {
	v := newLayerView(lowers)
	defer v.close()
	var out []string
	for _, d := range dirs {
		r, err := v.resolve("/"+d, follow)
		switch {
		case err != nil:
			return nil, fmt.Errorf("directory %s in the image: %w", d, err)
		case r.kind == entryFile:
			out = append(out, d)
		case r.kind == entryMissing:
			out = append(out, r.path)
		}
	}
	return out, nil
}
