// Package pack writes a layer in overlayfs form, as the unpacker leaves it
// and as a sandbox's writable layer is, back into an OCI layer tar: the
// inverse of package unpack, for commits and image saves.
package pack

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Write writes dir, a layer in overlayfs form (a sandbox's writable layer,
// or a layer of the store), to w as an uncompressed OCI layer tar:
// whiteouts (0:0 character devices) become .wh.<name> entries and opaque
// directories get a .wh..wh..opq entry. Paths for which skip (if not nil)
// is true, given relative with slashes (such as "etc/hosts"), are left out,
// directories with all below them. dir may be
// written by a sandbox and is hostile: nothing is followed, files are
// opened with O_NOFOLLOW, and only regular files, directories, symbolic
// links and hard links are kept.
func Write(w io.Writer, dir string, skip func(rel string) bool) error {
	return write(w, dir, skip, func(id uint32) int { return int(id) })
}

// WriteShifted is Write for the writable layer of a sandbox in a user
// namespace whose ids 0..size-1 are host ids hostID..: owners are written
// as the sandbox saw them, and an owner outside the range as 65534
// (nobody).
func WriteShifted(w io.Writer, dir string, skip func(rel string) bool, hostID, size uint32) error {
	return write(w, dir, skip, func(id uint32) int {
		if id >= hostID && id-hostID < size {
			return int(id - hostID)
		}
		return 65534
	})
}

func write(w io.Writer, dir string, skip func(rel string) bool, owner func(uint32) int) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, ino) -> first name, for hard links
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, full)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(full)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil {
			return fmt.Errorf("stat %s: no system data", rel)
		}
		mode := fi.Mode()
		hdr := &tar.Header{
			Name:    rel,
			Mode:    int64(mode.Perm()) | int64(st.Mode&(syscall.S_ISUID|syscall.S_ISGID|syscall.S_ISVTX)),
			Uid:     owner(st.Uid),
			Gid:     owner(st.Gid),
			ModTime: fi.ModTime(),
			Format:  tar.FormatPAX,
		}
		switch {
		case mode&fs.ModeCharDevice != 0 && st.Rdev == 0:
			// An overlayfs whiteout: the file was deleted.
			dir, base := filepath.Split(rel)
			return tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: fi.ModTime(), Format: tar.FormatPAX})
		case mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if opaque(full) {
				return tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: fi.ModTime(), Format: tar.FormatPAX})
			}
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		case mode.IsRegular():
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return tw.WriteHeader(hdr)
			}
			links[key] = rel
			f, err := os.OpenFile(full, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			if fst, err := f.Stat(); err != nil || !fst.Mode().IsRegular() {
				return fmt.Errorf("%s changed while it was read", rel)
			} else {
				hdr.Size = fst.Size()
			}
			hdr.Typeflag = tar.TypeReg
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, hdr.Size)
			return err
		default:
			return nil // sockets, fifos, devices: not part of an image
		}
	})
	if err != nil {
		return fmt.Errorf("pack layer %s: %w", dir, err)
	}
	return tw.Close()
}

// opaque reports whether overlayfs marked the directory opaque: it hides
// everything below it in the lower layers.
func opaque(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		n, err := unix.Lgetxattr(dir, attr, buf)
		if err == nil && n > 0 && strings.HasPrefix(string(buf[:n]), "y") {
			return true
		}
	}
	return false
}
