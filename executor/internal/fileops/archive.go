package fileops

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// Extract unpacks the tar stream r into dir (created if missing). Every
// entry is resolved inside dir with os.Root (one openat per component with
// O_NOFOLLOW, symlinks resolved within dir): absolute names, ".." escapes, and paths through symlinks that
// leave dir are refused, as are hard links to outside and device nodes.
// Entries are owned by the default user; modes and mtimes come from the
// archive. Extraction stops at the first refused entry; the entries before
// it stay written.
func (f *Files) Extract(dir string, r io.Reader) (api.ArchiveResult, error) {
	res := api.ArchiveResult{Path: dir}
	if err := f.MkdirAll(dir); err != nil {
		return res, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return res, statErr(dir, err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, errorf(api.CodeBadRequest, "read tar stream: %v", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return res, err
		}
		if name == "." {
			continue
		}
		n, err := f.extractEntry(root, name, hdr, tr)
		if err != nil {
			if isEscape(err) {
				return res, errorf(api.CodeUnsafePath, "tar entry %q would land outside %s: %v", hdr.Name, dir, err)
			}
			return res, fmt.Errorf("extract tar entry %q: %w", hdr.Name, err)
		}
		res.Entries++
		res.Bytes += n
	}
}

// entryName checks an archive path lexically and returns it cleaned and
// relative.
func entryName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", errorf(api.CodeUnsafePath, "tar entry name %q contains a NUL byte", name)
	}
	if path.IsAbs(name) {
		return "", errorf(api.CodeUnsafePath, "tar entry %q is absolute; entries must be relative to the target directory", name)
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", errorf(api.CodeUnsafePath, "tar entry %q climbs out of the target directory with ..", name)
	}
	return clean, nil
}

// isEscape reports an os.Root refusal.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

func (f *Files) extractEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader) (int64, error) {
	if parent := path.Dir(name); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return 0, err
		}
	}
	perm := os.FileMode(hdr.Mode) & (os.ModePerm)
	if hdr.Mode&0o1000 != 0 {
		perm |= os.ModeSticky
	}
	var n int64
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return 0, err
		}
		if err := root.Chmod(name, perm); err != nil {
			return 0, err
		}
	case tar.TypeReg:
		if err := replaceable(root, name); err != nil {
			return 0, err
		}
		out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return 0, err
		}
		n, err = io.Copy(out, r)
		if err == nil {
			err = out.Chmod(perm)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return n, err
		}
	case tar.TypeSymlink:
		if err := replaceable(root, name); err != nil {
			return 0, err
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return 0, err
		}
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return 0, err
		}
		if err := replaceable(root, name); err != nil {
			return 0, err
		}
		if err := root.Link(target, name); err != nil {
			return 0, err
		}
	default:
		return 0, errorf(api.CodeBadRequest, "tar entry %q has unsupported type %q (devices, FIFOs and sockets are refused)", hdr.Name, string(hdr.Typeflag))
	}
	if os.Geteuid() == 0 {
		if err := root.Lchown(name, f.UID, f.GID); err != nil {
			return n, err
		}
	}
	if hdr.Typeflag != tar.TypeSymlink && hdr.Typeflag != tar.TypeLink && !hdr.ModTime.IsZero() {
		if err := root.Chtimes(name, hdr.ModTime, hdr.ModTime); err != nil {
			return n, err
		}
	}
	return n, nil
}

// replaceable removes a non-directory at name, so that a new entry replaces
// it rather than writing through a symlink.
func replaceable(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errorf(api.CodeBadRequest, "tar entry %q would replace a directory", name)
	}
	return root.Remove(name)
}

// WriteArchive writes a tar of p to w: a file as one entry, a directory
// with everything below it, names starting with p's base name. Symlinks are
// stored as links, never followed.
func (f *Files) WriteArchive(w io.Writer, p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return statErr(p, err)
	}
	tw := tar.NewWriter(w)
	base := filepath.Base(p)
	if !fi.IsDir() {
		if err := addEntry(tw, p, base, fi); err != nil {
			return err
		}
		return tw.Close()
	}
	err = filepath.WalkDir(p, func(full string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p, full)
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		return addEntry(tw, full, filepath.ToSlash(filepath.Join(base, rel)), info)
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	return tw.Close()
}

func addEntry(tw *tar.Writer, full, name string, fi os.FileInfo) error {
	var link string
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		l, err := os.Readlink(full)
		if err != nil {
			return err
		}
		link = l
	case fi.Mode().IsRegular(), fi.IsDir():
	default:
		return nil // devices, sockets and FIFOs are skipped
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	hdr.ModTime = fi.ModTime().Truncate(time.Second)
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	hdr.Format = tar.FormatPAX
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	src, err := os.Open(full)
	if err != nil {
		return err
	}
	defer src.Close()
	n, err := io.Copy(tw, io.LimitReader(src, hdr.Size))
	if err != nil {
		return err
	}
	// The file shrank while archived: pad to the size in the header.
	if n < hdr.Size {
		_, err = io.CopyN(tw, zeros{}, hdr.Size-n)
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
