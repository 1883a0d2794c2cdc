// Package unpack extracts one OCI image layer (an uncompressed tar stream)
// into an empty directory so that the directory can serve directly as an
// overlayfs lower directory.
//
// Layers are hostile input. The unpacker rejects names with ".." and clamps
// absolute names into the layer, resolves every parent directory inside the
// layer root (absolute symlinks included, chroot-style, with
// github.com/cyphar/filepath-securejoin), never follows a symlink at the leaf,
// keeps hardlinks inside the layer (or inside the lower layers it was given),
// skips device nodes, keeps only user.* and security.capability xattrs and
// caps bytes, entries, path length and depth. OCI whiteouts become overlayfs
// whiteouts: ".wh.NAME" becomes a 0/0 character device NAME and
// ".wh..wh..opq" sets trusted.overlay.opaque=y on its directory. Those 0/0
// whiteouts are the only device nodes the unpacker ever creates.
package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// Limits caps what one layer may create. Zero fields take the defaults of
// DefaultLimits.
type Limits struct {
	MaxBytes   int64 // bytes of the uncompressed tar stream and of file contents written
	MaxEntries int   // tar entries
	MaxPathLen int   // length of an entry name or link target
	MaxDepth   int   // path components of an entry name
}

// DefaultLimits are generous enough for real images (a full distribution
// with toolchains) and small enough to stop decompression bombs.
var DefaultLimits = Limits{
	MaxBytes:   32 << 30,
	MaxEntries: 2_000_000,
	MaxPathLen: 4096,
	MaxDepth:   128,
}

func (l Limits) withDefaults() Limits { return l.Or(DefaultLimits) }

// Or returns l with every zero (or negative) field taken from def.
func (l Limits) Or(def Limits) Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = def.MaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = def.MaxEntries
	}
	if l.MaxPathLen <= 0 {
		l.MaxPathLen = def.MaxPathLen
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = def.MaxDepth
	}
	return l
}

// Options configure one Layer call.
type Options struct {
	Limits Limits
	// Lower returns the unpacked directories of the layers below this one,
	// topmost first. It is called only when the layer hardlinks to a file
	// that the layer itself does not contain (the file is then copied up
	// from the lower layers, as overlayfs would do). It may block until the
	// lower layers are ready. Nil means such hardlinks are an error.
	Lower func(ctx context.Context) ([]string, error)
}

// Stats describe what Layer did.
type Stats struct {
	Entries        int   // tar entries read
	Bytes          int64 // bytes of file content written
	SkippedDevices int   // device nodes skipped
	SkippedXattrs  int   // xattrs dropped (not user.* or security.capability)
	UsedLower      bool  // files were copied up from lower layers; the result depends on them
}

// ErrHostile marks entries that the unpacker refuses because they try to
// escape the layer, exceed a limit or are otherwise malformed.
var ErrHostile = errors.New("refused layer entry")

func hostile(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrHostile, fmt.Sprintf(format, args...))
}

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// dirTime is a directory mtime to set once the layer is complete; rel is
// relative to the layer root.
type dirTime struct {
	rel   string
	mtime time.Time
}

type deferredLink struct {
	name, target string
}

type unpacker struct {
	ctx    context.Context
	root   string
	opts   Options
	limits Limits
	stats  Stats
	// known holds relative paths that are real directories with no symlink
	// on the way; removing a directory forgets it and everything below.
	// Work deferred to the end of the layer acts only on known paths, so a
	// directory later replaced by a symlink cannot redirect it.
	known    map[string]bool
	dirTimes []dirTime
	deferred []deferredLink
	written  map[string]bool // names written after a deferred hardlink to them
	implicit map[string]bool // directories created without an entry
}

// Layer reads the uncompressed tar stream r and unpacks it into dir, which
// must be an existing empty directory owned by the caller. On error dir is
// left in an unspecified state and the caller must remove it.
func Layer(ctx context.Context, r io.Reader, dir string, opts Options) (Stats, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return Stats{}, err
	}
	u := &unpacker{
		ctx:    ctx,
		root:   filepath.Clean(root),
		opts:   opts,
		limits: opts.Limits.withDefaults(),
		known:  map[string]bool{"": true},
	}
	cr := &countingReader{r: r, max: u.limits.MaxBytes}
	tr := tar.NewReader(cr)
	for {
		if err := ctx.Err(); err != nil {
			return u.stats, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cr.exceeded {
				return u.stats, hostile("layer is larger than the limit of %d bytes", u.limits.MaxBytes)
			}
			return u.stats, fmt.Errorf("read layer tar: %w", err)
		}
		u.stats.Entries++
		if u.stats.Entries > u.limits.MaxEntries {
			return u.stats, hostile("layer has more than %d entries", u.limits.MaxEntries)
		}
		if err := u.entry(hdr, tr); err != nil {
			if cr.exceeded {
				return u.stats, hostile("layer is larger than the limit of %d bytes", u.limits.MaxBytes)
			}
			return u.stats, fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	if err := u.finishDeferred(); err != nil {
		return u.stats, err
	}
	if err := u.finishImplicit(); err != nil {
		return u.stats, err
	}
	// Directory mtimes last, deepest first, since creating entries changes them.
	sort.SliceStable(u.dirTimes, func(i, j int) bool { return len(u.dirTimes[i].rel) > len(u.dirTimes[j].rel) })
	for _, d := range u.dirTimes {
		if !u.known[d.rel] {
			continue // replaced later in the layer
		}
		full := filepath.Join(u.root, d.rel)
		if err := setMtime(full, d.mtime); err != nil && !errors.Is(err, unix.ENOENT) {
			return u.stats, fmt.Errorf("set mtime of %s: %w", full, err)
		}
	}
	return u.stats, nil
}

// countingReader fails once more than max bytes have been read.
type countingReader struct {
	r        io.Reader
	n, max   int64
	exceeded bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.exceeded = true
		return n, fmt.Errorf("%w: layer stream exceeds %d bytes", ErrHostile, c.max)
	}
	return n, err
}

// cleanName validates a tar entry name and returns it relative to the layer
// root ("" is the root itself). Names with ".." are refused, absolute names
// are clamped into the layer.
func (u *unpacker) cleanName(name string) (string, error) {
	if name == "" {
		return "", hostile("empty name")
	}
	if len(name) > u.limits.MaxPathLen {
		return "", hostile("name longer than %d bytes", u.limits.MaxPathLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", hostile("name contains a NUL byte")
	}
	depth := 0
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", hostile("name contains ..")
		}
		if part != "" && part != "." {
			depth++
		}
	}
	if depth > u.limits.MaxDepth {
		return "", hostile("name deeper than %d components", u.limits.MaxDepth)
	}
	return strings.TrimPrefix(path.Clean("/"+name), "/"), nil
}

// forget drops rel and everything below it from the known directories.
func (u *unpacker) forget(rel string) {
	delete(u.known, rel)
	prefix := rel + "/"
	for k := range u.known {
		if strings.HasPrefix(k, prefix) {
			delete(u.known, k)
		}
	}
}

// relOf returns full relative to the layer root.
func (u *unpacker) relOf(full string) string {
	if full == u.root {
		return ""
	}
	return strings.TrimPrefix(full, u.root+"/")
}

// parentDir returns the host path of the directory that will hold rel,
// resolved inside the layer root, creating missing directories (0755, root).
func (u *unpacker) parentDir(rel string) (string, error) {
	parent := path.Dir(rel)
	if parent == "." {
		parent = ""
	}
	if u.known[parent] {
		return filepath.Join(u.root, parent), nil
	}
	p, err := securejoin.SecureJoin(u.root, parent)
	if err != nil {
		return "", fmt.Errorf("resolve parent %q in layer: %w", parent, err)
	}
	if p != u.root && !strings.HasPrefix(p, u.root+"/") {
		return "", hostile("parent %q resolves outside the layer", parent)
	}
	fi, err := os.Lstat(p)
	switch {
	case err == nil && !fi.IsDir():
		return "", hostile("parent %q is not a directory", parent)
	case errors.Is(err, os.ErrNotExist):
		// The unresolved tail has no symlinks (it does not exist yet).
		if err := u.mkdirs(p); err != nil {
			return "", fmt.Errorf("create parent %q: %w", parent, err)
		}
	case err != nil:
		return "", err
	}
	u.known[u.relOf(p)] = true
	return p, nil
}

// mkdirs creates p and its missing parents (0755, root) and remembers them
// as implicit: their metadata comes from the lower layers at the end.
func (u *unpacker) mkdirs(p string) error {
	var missing []string
	for q := p; q != u.root && strings.HasPrefix(q, u.root+"/"); q = filepath.Dir(q) {
		if _, err := os.Lstat(q); err == nil {
			break
		}
		missing = append(missing, q)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := unix.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		if u.implicit == nil {
			u.implicit = map[string]bool{}
		}
		rel := u.relOf(missing[i])
		u.implicit[rel] = true
		u.known[rel] = true
	}
	return nil
}

// finishImplicit gives directories the layer created without an entry the
// owner, mode and mtime they have in the lower layers, as if the layer had
// been applied on top of them.
func (u *unpacker) finishImplicit() error {
	if len(u.implicit) == 0 || u.opts.Lower == nil {
		return nil
	}
	lowers, err := u.opts.Lower(u.ctx)
	if err != nil {
		return fmt.Errorf("lower layers: %w", err)
	}
	for rel := range u.implicit {
		if !u.known[rel] {
			continue // replaced later in the layer: never act through a symlink
		}
		for _, lower := range lowers {
			src, err := resolveExisting(lower, rel)
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if err := unix.Lstat(src, &st); err != nil {
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				break
			}
			full := filepath.Join(u.root, rel)
			var cur unix.Stat_t
			if err := unix.Lstat(full, &cur); err != nil || cur.Mode&unix.S_IFMT != unix.S_IFDIR {
				break // replaced later in the layer: never chmod through a symlink
			}
			if err := unix.Lchown(full, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
			if err := unix.Chmod(full, st.Mode&0o7777); err != nil {
				return err
			}
			u.dirTimes = append(u.dirTimes, dirTime{rel, time.Unix(st.Mtim.Unix())})
			u.stats.UsedLower = true
			break
		}
	}
	return nil
}

// resolveExisting finds rel inside root without creating anything; it
// returns the host path of rel (whose leaf is not followed).
func resolveExisting(root, rel string) (string, error) {
	parent := path.Dir(rel)
	if parent == "." {
		parent = ""
	}
	p, err := securejoin.SecureJoin(root, parent)
	if err != nil {
		return "", err
	}
	if p != root && !strings.HasPrefix(p, root+"/") {
		return "", hostile("%q resolves outside the layer", rel)
	}
	return filepath.Join(p, path.Base(rel)), nil
}

// removeLeaf removes whatever is at full (never following it).
func (u *unpacker) removeLeaf(full string) error {
	fi, err := os.Lstat(full)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		u.forget(u.relOf(full))
		return os.RemoveAll(full)
	}
	return unix.Unlink(full)
}

func (u *unpacker) entry(hdr *tar.Header, tr *tar.Reader) error {
	rel, err := u.cleanName(hdr.Name)
	if err != nil {
		return err
	}
	base := path.Base(rel)
	if rel != "" && strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(rel, base)
	}
	if u.deferred != nil {
		if u.written == nil {
			u.written = map[string]bool{}
		}
		u.written[rel] = true
	}
	if rel == "" {
		if hdr.Typeflag != tar.TypeDir {
			return hostile("the layer root can only be a directory")
		}
		return u.applyMeta(u.root, hdr, true)
	}
	if hdr.Typeflag == tar.TypeLink || hdr.Typeflag == tar.TypeSymlink {
		if hdr.Linkname == "" {
			return hostile("link without a target")
		}
		if len(hdr.Linkname) > u.limits.MaxPathLen {
			return hostile("link target longer than %d bytes", u.limits.MaxPathLen)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		// Device nodes are never created from a layer; /dev comes from the runtime.
		u.stats.SkippedDevices++
		return nil
	case tar.TypeXGlobalHeader, tar.TypeCont:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeGNUSparse:
	default:
		return nil
	}
	dir, err := u.parentDir(rel)
	if err != nil {
		return err
	}
	full := filepath.Join(dir, base)
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(full, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		return u.file(full, hdr, tr)
	case tar.TypeSymlink:
		return u.symlink(full, hdr)
	case tar.TypeLink:
		return u.hardlink(rel, full, hdr)
	case tar.TypeFifo:
		if err := u.create(full, func() error { return unix.Mkfifo(full, 0o600) }); err != nil {
			return err
		}
		return u.applyMeta(full, hdr, false)
	}
	return nil
}

// create runs mk, and when the name exists already replaces what is there.
func (u *unpacker) create(full string, mk func() error) error {
	err := mk()
	if errors.Is(err, unix.EEXIST) {
		if err := u.removeLeaf(full); err != nil {
			return err
		}
		err = mk()
	}
	return err
}

func (u *unpacker) dir(full string, hdr *tar.Header) error {
	err := unix.Mkdir(full, 0o700)
	if errors.Is(err, unix.EEXIST) {
		fi, lerr := os.Lstat(full)
		if lerr != nil {
			return lerr
		}
		if !fi.IsDir() {
			if err := unix.Unlink(full); err != nil {
				return err
			}
			err = unix.Mkdir(full, 0o700)
		} else {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	rel := u.relOf(full)
	u.known[rel] = true
	delete(u.implicit, rel)
	return u.applyMeta(full, hdr, true)
}

func (u *unpacker) file(full string, hdr *tar.Header, tr *tar.Reader) error {
	// Raw descriptors: os.File would register each file with the poller.
	fd := -1
	err := u.create(full, func() error {
		var err error
		fd, err = unix.Open(full, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if hdr.Size > 0 || hdr.Typeflag == tar.TypeGNUSparse {
		remaining := u.limits.MaxBytes - u.stats.Bytes
		bp := bufPool.Get().(*[]byte)
		n, err := io.CopyBuffer(fdWriter(fd), io.LimitReader(tr, remaining+1), *bp)
		bufPool.Put(bp)
		u.stats.Bytes += n
		if err != nil {
			return fmt.Errorf("write %s: %w", full, err)
		}
		if n > remaining {
			return hostile("file contents exceed the limit of %d bytes", u.limits.MaxBytes)
		}
	}
	if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	// After chown, which clears setuid and setgid.
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return err
	}
	if err := u.xattrs(fd, full, hdr); err != nil {
		return err
	}
	return setMtime(full, hdr.ModTime)
}

// fdWriter writes to a raw file descriptor.
type fdWriter int

func (w fdWriter) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := unix.Write(int(w), p[written:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// modeBits converts the setuid, setgid and sticky bits of a tar mode.
func modeBits(mode int64) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

func (u *unpacker) symlink(full string, hdr *tar.Header) error {
	if err := u.create(full, func() error { return unix.Symlink(hdr.Linkname, full) }); err != nil {
		return err
	}
	if err := unix.Lchown(full, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	return setMtime(full, hdr.ModTime)
}

func (u *unpacker) hardlink(rel, full string, hdr *tar.Header) error {
	target, err := u.cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hardlink target: %w", err)
	}
	if target == "" || target == rel {
		return hostile("hardlink to the layer root or to itself")
	}
	tfull, err := resolveExisting(u.root, target)
	if err != nil {
		return fmt.Errorf("hardlink target: %w", err)
	}
	fi, err := os.Lstat(tfull)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		// A hardlink to a file of a lower layer: resolved after this layer.
		u.deferred = append(u.deferred, deferredLink{name: rel, target: target})
		delete(u.written, rel)
		return nil
	}
	if err != nil {
		return err
	}
	if err := linkable(fi); err != nil {
		return err
	}
	return u.create(full, func() error { return unix.Linkat(unix.AT_FDCWD, tfull, unix.AT_FDCWD, full, 0) })
}

func linkable(fi os.FileInfo) error {
	switch {
	case fi.IsDir():
		return hostile("hardlink to a directory")
	case fi.Mode()&(os.ModeDevice|os.ModeCharDevice) != 0:
		return hostile("hardlink to a device or whiteout")
	}
	return nil
}

// finishDeferred resolves hardlinks to files of lower layers by copying the
// file up into this layer first, as overlayfs does on link(2).
func (u *unpacker) finishDeferred() error {
	for _, d := range u.deferred {
		if u.written[d.name] {
			continue // a later entry of this layer replaced the link
		}
		// The target may have appeared later in this same layer.
		if tfull, err := resolveExisting(u.root, d.target); err == nil {
			if fi, err := os.Lstat(tfull); err == nil {
				if err := linkable(fi); err != nil {
					return fmt.Errorf("hardlink %q: %w", d.name, err)
				}
				if err := u.linkInLayer(d.name, tfull); err != nil {
					return err
				}
				continue
			}
		}
		if u.opts.Lower == nil {
			return hostile("hardlink %q points to %q, which is not in the layer", d.name, d.target)
		}
		lowers, err := u.opts.Lower(u.ctx)
		if err != nil {
			return fmt.Errorf("hardlink %q: lower layers: %w", d.name, err)
		}
		if err := u.copyUp(d.target, lowers); err != nil {
			return fmt.Errorf("hardlink %q to %q: %w", d.name, d.target, err)
		}
		u.stats.UsedLower = true
		tfull, err := resolveExisting(u.root, d.target)
		if err != nil {
			return err
		}
		if err := u.linkInLayer(d.name, tfull); err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) linkInLayer(name, tfull string) error {
	dir, err := u.parentDir(name)
	if err != nil {
		return err
	}
	full := filepath.Join(dir, path.Base(name))
	return u.create(full, func() error { return unix.Linkat(unix.AT_FDCWD, tfull, unix.AT_FDCWD, full, 0) })
}

// copyUp copies the regular file target from the topmost lower layer that
// has it into this layer, with its parent directories' metadata.
func (u *unpacker) copyUp(target string, lowers []string) error {
	for _, lower := range lowers {
		src, err := resolveExisting(lower, target)
		if err != nil {
			continue
		}
		fi, err := os.Lstat(src)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeCharDevice != 0 {
			break // whited out
		}
		if !fi.Mode().IsRegular() {
			return hostile("hardlink across layers to something other than a regular file")
		}
		if err := u.copyParents(target, lower); err != nil {
			return err
		}
		return u.copyFile(src, target, fi)
	}
	return hostile("hardlink target %q is in no layer", target)
}

// copyParents creates the missing parents of target in this layer with the
// owner, mode and mtime they have in lower.
func (u *unpacker) copyParents(target, lower string) error {
	parts := strings.Split(path.Dir(target), "/")
	cur := ""
	for _, p := range parts {
		if p == "." || p == "" {
			continue
		}
		cur = path.Join(cur, p)
		dst, err := resolveExisting(u.root, cur)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		mode, uid, gid, mtime := os.FileMode(0o755), 0, 0, time.Time{}
		if src, err := resolveExisting(lower, cur); err == nil {
			var st unix.Stat_t
			if unix.Lstat(src, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				mode = os.FileMode(st.Mode & 0o777)
				uid, gid = int(st.Uid), int(st.Gid)
				mtime = time.Unix(st.Mtim.Unix())
			}
		}
		if err := unix.Mkdir(dst, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(dst, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(dst, mode); err != nil {
			return err
		}
		u.known[u.relOf(dst)] = true
		if !mtime.IsZero() {
			u.dirTimes = append(u.dirTimes, dirTime{u.relOf(dst), mtime})
		}
	}
	return nil
}

func (u *unpacker) copyFile(src, target string, fi os.FileInfo) error {
	dst, err := resolveExisting(u.root, target)
	if err != nil {
		return err
	}
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := out.Chown(int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := out.Chmod(fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)); err != nil {
		return err
	}
	for _, name := range []string{"security.capability"} {
		buf := make([]byte, 256)
		if n, err := unix.Fgetxattr(int(in.Fd()), name, buf); err == nil {
			_ = unix.Fsetxattr(int(out.Fd()), name, buf[:n], 0)
		}
	}
	return setMtime(dst, fi.ModTime())
}

// whiteout converts an OCI whiteout entry into its overlayfs form.
func (u *unpacker) whiteout(rel, base string) error {
	dirRel := path.Dir(rel)
	if dirRel == "." {
		dirRel = ""
	}
	if base == opaqueMarker {
		if dirRel == "" {
			return hostile("opaque whiteout of the layer root")
		}
		dir, err := u.parentDir(rel)
		if err != nil {
			return err
		}
		if dir == u.root {
			return hostile("opaque whiteout of the layer root through %q", dirRel)
		}
		if err := unix.Lsetxattr(dir, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %s opaque (overlayfs needs trusted xattrs, so root and a filesystem like ext4 or xfs): %w", dir, err)
		}
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if strings.HasPrefix(name, whiteoutPrefix) {
		return nil // other AUFS metadata (.wh..wh.plnk and the like)
	}
	if name == "" || name == "." || name == ".." {
		return hostile("whiteout of %q", rel)
	}
	dir, err := u.parentDir(rel)
	if err != nil {
		return err
	}
	full := filepath.Join(dir, name)
	// A whiteout hides lower layers only: an entry of this layer stays.
	err = unix.Mknod(full, unix.S_IFCHR|0o600, 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create whiteout %s: %w", full, err)
	}
	return nil
}

// applyMeta sets owner, mode, xattrs and (later, for directories) mtime.
func (u *unpacker) applyMeta(full string, hdr *tar.Header, isDir bool) error {
	if err := unix.Lchown(full, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := os.Chmod(full, os.FileMode(hdr.Mode&0o777)|modeBits(hdr.Mode)); err != nil {
		return err
	}
	if err := u.xattrs(-1, full, hdr); err != nil {
		return err
	}
	if isDir {
		u.dirTimes = append(u.dirTimes, dirTime{u.relOf(full), hdr.ModTime})
		return nil
	}
	return setMtime(full, hdr.ModTime)
}

// xattrs applies the allowed xattrs of hdr (user.* and security.capability)
// through fd, or through full (not following it) when fd is -1.
func (u *unpacker) xattrs(fd int, full string, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if !strings.HasPrefix(name, "user.") && name != "security.capability" {
			u.stats.SkippedXattrs++
			continue
		}
		var err error
		if fd >= 0 {
			err = unix.Fsetxattr(fd, name, []byte(v), 0)
		} else {
			err = unix.Lsetxattr(full, name, []byte(v), 0)
		}
		if err != nil {
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

func setMtime(full string, mtime time.Time) error {
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, full, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
