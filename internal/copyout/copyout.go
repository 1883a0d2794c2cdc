// Package copyout installs on the host a file or directory tree that came
// out of a sandbox as a tar stream (sbx cp ID:SRC DST). The stream is
// hostile: the sandbox, its executor included, decides every byte of it.
//
// The rules are those of a hostile image layer, tightened for files that
// land in a user's directory:
//
//   - Every entry must lie under the one top-level name the caller expects
//     (the base name of SRC); names with "..", absolute names elsewhere,
//     NUL bytes, too long or too deep names are refused.
//   - The tree is first extracted into a fresh staging directory beside the
//     destination, resolving every path one component at a time with
//     O_NOFOLLOW: no symlink is ever followed, not even one the stream
//     itself created. Leaves are replaced, never written through.
//   - Hard links must point at a regular file of the copy; devices, FIFOs,
//     sockets and sparse entries are refused; setuid, setgid and sticky bits
//     and ownership are dropped; content, entries, name length and depth
//     are capped.
//   - Only a complete, valid tree is installed: renamed into place when the
//     destination does not exist, or merged into an existing directory
//     without following any symlink in it. On error nothing of the copy is
//     left (except a merge interrupted by a conflict with what the user's
//     directory already holds, which is reported).
package copyout

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/imagecache/unpack"
	"github.com/sbxrun/sbx/internal/termsafe"
)

// Limits cap what one copy may create (content bytes summed over the
// copy, entries, bytes of a name or symlink target, components of a name),
// as they cap an image layer. Zero fields take DefaultLimits.
type Limits = unpack.Limits

// DefaultLimits are those of sbx cp.
var DefaultLimits = Limits{MaxBytes: 8 << 30, MaxEntries: 1_000_000, MaxPathLen: 4096, MaxDepth: 256}

// ErrRefused marks a stream that breaks the rules above.
var ErrRefused = errors.New("refused what the sandbox sent")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Extract reads a tar stream whose entries all lie under the top-level
// name top (top "/" for a copy of a whole root: entries "/", "/etc", ...)
// and installs the tree as dir/name. dir is the caller's: it is opened
// normally, symlinks included; name must be one path component.
func Extract(r io.Reader, top, dir, name string, lim Limits) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid destination name %q", name)
	}
	dirFD, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("destination directory %s: %w", dir, err)
	}
	defer unix.Close(dirFD)
	stageName, err := makeStage(dirFD)
	if err != nil {
		return fmt.Errorf("staging directory in %s: %w", dir, err)
	}
	defer removeStage(dir, stageName)
	stageFD, err := unix.Openat(dirFD, stageName, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("staging directory in %s: %w", dir, err)
	}
	defer unix.Close(stageFD)
	x := &extractor{root: stageFD, top: top, name: name, lim: lim.Or(DefaultLimits)}
	if err := x.read(r); err != nil {
		return err
	}
	if !x.sawTop {
		return refused("the stream holds nothing")
	}
	return install(stageFD, dirFD, name, filepath.Join(dir, name))
}

// makeStage creates a fresh, private directory in dirFD.
func makeStage(dirFD int) (string, error) {
	for i := 0; i < 10; i++ {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		n := ".sbx-cp-" + hex.EncodeToString(b)
		err := unix.Mkdirat(dirFD, n, 0o700)
		if err == nil {
			return n, nil
		}
		if err != unix.EEXIST {
			return "", err
		}
	}
	return "", errors.New("no unused name")
}

// removeStage removes the staging directory and whatever is left in it
// (os.RemoveAll never follows symlinks).
func removeStage(dir, stage string) { _ = os.RemoveAll(filepath.Join(dir, stage)) }

type dirMeta struct {
	rel   string
	mode  uint32
	mtime time.Time
}

type extractor struct {
	root      int // the staging directory
	top, name string
	lim       Limits
	entries   int
	bytes     int64
	sawTop    bool
	dirs      []dirMeta
	dirBytes  int // what dirs holds, capped by maxDirMeta
}

// maxDirMeta caps the memory one copy keeps for its directories' modes
// and times, applied at the end (a hostile stream of a million
// directories with 4 KiB names would otherwise hold gigabytes): about
// 100,000 directories of 100-byte names. Nothing else is kept per entry.
const maxDirMeta = 16 << 20

func (x *extractor) read(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read the tar stream: %w", err)
		}
		if x.entries++; x.entries > x.lim.MaxEntries {
			return refused("more than %d entries", x.lim.MaxEntries)
		}
		rel, err := x.relName(hdr.Name)
		if err != nil {
			return err
		}
		if err := x.entry(rel, hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", sanitize(hdr.Name), err)
		}
	}
	// Directory modes and times last, deepest first: creating entries
	// changes a directory's mtime.
	sort.SliceStable(x.dirs, func(i, j int) bool { return strings.Count(x.dirs[i].rel, "/") > strings.Count(x.dirs[j].rel, "/") })
	for _, d := range x.dirs {
		if err := x.finishDir(d); err != nil {
			return err
		}
	}
	return nil
}

// relName maps an entry name to a path relative to the staging directory:
// name for the top itself, name/REST below it.
func (x *extractor) relName(n string) (string, error) {
	if len(n) > x.lim.MaxPathLen {
		return "", refused("an entry name is longer than %d bytes", x.lim.MaxPathLen)
	}
	if strings.IndexByte(n, 0) >= 0 {
		return "", refused("an entry name has a NUL byte")
	}
	var rest string
	if x.top == "/" {
		if !strings.HasPrefix(n, "/") {
			return "", refused("entry %q is not under /", sanitize(n))
		}
		rest = strings.Trim(n, "/")
	} else {
		first, r, _ := strings.Cut(strings.TrimSuffix(n, "/"), "/")
		if first != x.top {
			return "", refused("entry %q is not under %q, the name copied", sanitize(n), sanitize(x.top))
		}
		rest = r
	}
	parts := []string{x.name}
	if rest != "" {
		for _, p := range strings.Split(rest, "/") {
			switch p {
			case "", ".":
				continue
			case "..":
				return "", refused("entry %q has ..", sanitize(n))
			}
			parts = append(parts, p)
		}
	}
	if len(parts) > x.lim.MaxDepth {
		return "", refused("entry %q is deeper than %d components", sanitize(n), x.lim.MaxDepth)
	}
	return strings.Join(parts, "/"), nil
}

func (x *extractor) entry(rel string, hdr *tar.Header, tr *tar.Reader) error {
	if rel == x.name {
		x.sawTop = true
	} else if !x.sawTop {
		return refused("the copied %q must come first", sanitize(x.top))
	}
	parent, base := path.Split(rel)
	pfd, err := x.makeDir(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	perm := uint32(hdr.Mode) & 0o777 // never setuid, setgid or sticky from a sandbox
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			if err != unix.EEXIST || !isDir(pfd, base) {
				return fmt.Errorf("create directory: %w", err)
			}
		}
		if x.dirBytes += len(rel) + 64; x.dirBytes > maxDirMeta {
			return refused("more directories than one copy keeps track of (%d MiB of names)", maxDirMeta>>20)
		}
		x.dirs = append(x.dirs, dirMeta{rel: rel, mode: perm | 0o700, mtime: hdr.ModTime})
		return nil
	case tar.TypeReg:
		if hdr.Size > x.lim.MaxBytes-x.bytes {
			return refused("the copy holds more than %d bytes", x.lim.MaxBytes)
		}
		if err := x.clearLeaf(pfd, base); err != nil {
			return err
		}
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("create file: %w", err)
		}
		f := os.NewFile(uintptr(fd), rel)
		n, err := io.Copy(f, io.LimitReader(tr, hdr.Size))
		x.bytes += n
		if err == nil && n != hdr.Size {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			err = f.Chmod(os.FileMode(perm))
		}
		if err == nil {
			err = unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(hdr.ModTime.UnixNano()), unix.NsecToTimeval(hdr.ModTime.UnixNano())})
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write file: %w", err)
		}
		return nil
	case tar.TypeSymlink:
		if hdr.Linkname == "" || len(hdr.Linkname) > x.lim.MaxPathLen || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return refused("bad symlink target")
		}
		if err := x.clearLeaf(pfd, base); err != nil {
			return err
		}
		// Stored as it is and never followed by sbx.
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return fmt.Errorf("create symlink: %w", err)
		}
		return nil
	case tar.TypeLink:
		target, err := x.relName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link target: %w", err)
		}
		if target == rel {
			return refused("hard link to %q, which is not a file of the copy", sanitize(hdr.Linkname))
		}
		tparent, tbase := path.Split(target)
		tfd, err := x.openDir(strings.TrimSuffix(tparent, "/"))
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		// The staging tree holds only what this copy made: a regular
		// file there is a file of the copy.
		if !isRegular(tfd, tbase) {
			return refused("hard link to %q, which is not a regular file of the copy", sanitize(hdr.Linkname))
		}
		if err := x.clearLeaf(pfd, base); err != nil {
			return err
		}
		if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
			return fmt.Errorf("create hard link: %w", err)
		}
		return nil
	}
	return refused("entry of type %q (devices, FIFOs, sockets and sparse files are not copied)", string(hdr.Typeflag))
}

// openDir opens the directory rel of the staging tree, one component at a
// time, following no symlink.
func (x *extractor) openDir(rel string) (int, error) { return x.walk(rel, false) }

// makeDir is openDir that creates missing directories (0700) on the way,
// for entries whose directories the stream does not list.
func (x *extractor) makeDir(rel string) (int, error) { return x.walk(rel, true) }

func (x *extractor) walk(rel string, create bool) (int, error) {
	fd, err := unix.Openat(x.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, c := range strings.Split(rel, "/") {
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, c, 0o700); err == nil {
				next, err = unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return -1, refused("%q is not a directory of the copy (a symlink or a file)", sanitize(rel))
		}
		if err != nil {
			return -1, fmt.Errorf("directory %q of the copy: %w", sanitize(rel), err)
		}
		fd = next
	}
	return fd, nil
}

// clearLeaf removes a non-directory at base, so that it is replaced and
// never written through.
func (x *extractor) clearLeaf(pfd int, base string) error {
	err := unix.Unlinkat(pfd, base, 0)
	switch err {
	case nil, unix.ENOENT:
		return nil
	case unix.EISDIR:
		return refused("%q replaces a directory of the copy", sanitize(base))
	}
	return err
}

func (x *extractor) finishDir(d dirMeta) error {
	parent, base := path.Split(d.rel)
	pfd, err := x.openDir(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if !isDir(pfd, base) {
		return nil // replaced by a later entry
	}
	if err := unix.Fchmodat(pfd, base, d.mode, 0); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(d.mtime.UnixNano()), unix.NsecToTimespec(d.mtime.UnixNano())}
	return unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func fileType(dirFD int, name string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	return st.Mode & unix.S_IFMT, nil
}

func isDir(dirFD int, name string) bool {
	t, err := fileType(dirFD, name)
	return err == nil && t == unix.S_IFDIR
}

func isRegular(dirFD int, name string) bool {
	t, err := fileType(dirFD, name)
	return err == nil && t == unix.S_IFREG
}

// install moves name from the staging directory to dirFD: a rename when
// the destination does not exist or both are files, a merge when both are
// directories. shown is the destination's path for messages.
func install(stageFD, dirFD int, name, shown string) error {
	newType, err := fileType(stageFD, name)
	if err != nil {
		return err
	}
	oldType, err := fileType(dirFD, name)
	switch {
	case err == unix.ENOENT:
		if err := unix.Renameat2(stageFD, name, dirFD, name, unix.RENAME_NOREPLACE); err != nil {
			return fmt.Errorf("install %s: %w", shown, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("destination %s: %w", shown, err)
	case oldType == unix.S_IFDIR && newType == unix.S_IFDIR:
		return merge(stageFD, dirFD, name, shown)
	case oldType == unix.S_IFDIR:
		return fmt.Errorf("cannot overwrite directory %s with a non-directory", shown)
	case newType == unix.S_IFDIR:
		return fmt.Errorf("cannot overwrite non-directory %s with a directory", shown)
	}
	// Both are non-directories (a symlink of the user's included, which is
	// replaced, not followed).
	if err := unix.Renameat(stageFD, name, dirFD, name); err != nil {
		return fmt.Errorf("install %s: %w", shown, err)
	}
	return nil
}

// merge moves the entries of the directory name of fromFD into the
// existing directory name of toFD, opened without following symlinks.
func merge(fromFD, toFD int, name, shown string) error {
	from, err := unix.Openat(fromFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	to, err := unix.Openat(toFD, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("destination %s: %w", shown, err)
	}
	defer unix.Close(to)
	dup, err := unix.Dup(from)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), name)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		if err := install(from, to, n, filepath.Join(shown, n)); err != nil {
			return err
		}
	}
	return nil
}

// sanitize makes a name from the stream safe to show on a terminal.
func sanitize(s string) string { return termsafe.String(s, 256) }
