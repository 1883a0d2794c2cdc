package fileops

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// Extract unpacks the tar stream r into dir (created if missing). Every
// entry is resolved inside dir with os.Root (one openat per component with
// O_NOFOLLOW, symlinks resolved within dir): absolute names, ".." escapes,
// and paths through symlinks that leave dir are refused, as are hard links
// to outside and device nodes. Entries are owned by the default user; modes
// and mtimes come from the archive. Extraction is all or nothing: every
// change is journaled (replaced files are moved aside into a hidden
// directory inside dir, on the same filesystem), and a refused entry or a
// broken stream undoes all of them, so bad input leaves dir as it was.
func (f *Files) Extract(dir string, r io.Reader) (res api.ArchiveResult, err error) {
	res = api.ArchiveResult{Path: dir}
	missing := missingDirs(dir)
	if err := f.MkdirAll(dir); err != nil {
		return res, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		removeDirs(missing)
		return res, statErr(dir, err)
	}
	defer root.Close()
	j := &journal{root: root}
	defer func() {
		if err != nil {
			j.undo()
			removeDirs(missing)
			res.Entries, res.Bytes = 0, 0
		}
		j.finish()
	}()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, errorf(api.CodeBadRequest, "read tar stream: %v (nothing was extracted)", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return res, err
		}
		if name == "." {
			continue
		}
		n, err := f.extractEntry(j, name, hdr, tr)
		if err != nil {
			if isEscape(err) {
				return res, errorf(api.CodeUnsafePath, "tar entry %q would land outside %s: %v (nothing was extracted)", hdr.Name, dir, err)
			}
			var fe *Error
			if errors.As(err, &fe) {
				return res, err
			}
			return res, fmt.Errorf("extract tar entry %q: %w (nothing was extracted)", hdr.Name, err)
		}
		res.Entries++
		res.Bytes += n
	}
}

// missingDirs lists dir and its missing ancestors, deepest first.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}

// removeDirs removes directories Extract created, if still empty.
func removeDirs(dirs []string) {
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}

// journal records the changes of one extraction so they can be undone.
type journal struct {
	root   *os.Root
	undos  []func() error
	backup string // hidden directory holding replaced entries, if any
	n      int
}

func (j *journal) record(undo func() error) { j.undos = append(j.undos, undo) }

// created records a new entry at name.
func (j *journal) created(name string) {
	j.record(func() error { return j.root.Remove(name) })
}

// moveAside moves the existing non-directory at name into the backup
// directory and records how to put it back.
func (j *journal) moveAside(name string) error {
	if j.backup == "" {
		b := ".sbx-extract-" + randomSuffix()
		if err := j.root.Mkdir(b, 0o700); err != nil {
			return fmt.Errorf("create the undo directory: %w", err)
		}
		j.backup = b
	}
	j.n++
	saved := path.Join(j.backup, strconv.Itoa(j.n))
	if err := j.root.Rename(name, saved); err != nil {
		return err
	}
	j.record(func() error { return j.root.Rename(saved, name) })
	return nil
}

// keepAttrs records an existing directory's mode and times.
func (j *journal) keepAttrs(name string) error {
	fi, err := j.root.Stat(name)
	if err != nil {
		return err
	}
	mode, mtime := fi.Mode(), fi.ModTime()
	j.record(func() error {
		if err := j.root.Chmod(name, mode&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid)); err != nil {
			return err
		}
		return j.root.Chtimes(name, mtime, mtime)
	})
	return nil
}

// mkdirAll creates name and its missing parents inside the root, recording
// each directory it creates.
func (j *journal) mkdirAll(name string) error {
	parts := strings.Split(name, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		fi, err := j.root.Stat(sub)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("mkdir %s: %w", sub, syscall.ENOTDIR)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := j.root.Mkdir(sub, 0o755); err != nil {
			return err
		}
		j.created(sub)
	}
	return nil
}

// undo reverts every recorded change, newest first.
func (j *journal) undo() {
	for i := len(j.undos) - 1; i >= 0; i-- {
		_ = j.undos[i]()
	}
	j.undos = nil
}

// finish removes the backup directory.
func (j *journal) finish() {
	if j.backup != "" {
		_ = j.root.RemoveAll(j.backup)
	}
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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

func (f *Files) extractEntry(j *journal, name string, hdr *tar.Header, r io.Reader) (int64, error) {
	root := j.root
	if parent := path.Dir(name); parent != "." {
		if err := j.mkdirAll(parent); err != nil {
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
		if fi, err := root.Stat(name); err == nil && fi.IsDir() {
			if err := j.keepAttrs(name); err != nil {
				return 0, err
			}
		} else if err := j.mkdirAll(name); err != nil {
			return 0, err
		}
		if err := root.Chmod(name, perm); err != nil {
			return 0, err
		}
	case tar.TypeReg:
		if err := replaceable(j, name); err != nil {
			return 0, err
		}
		out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return 0, err
		}
		j.created(name)
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
		if err := replaceable(j, name); err != nil {
			return 0, err
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return 0, err
		}
		j.created(name)
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return 0, err
		}
		if err := replaceable(j, name); err != nil {
			return 0, err
		}
		if err := root.Link(target, name); err != nil {
			return 0, err
		}
		j.created(name)
	default:
		return 0, errorf(api.CodeBadRequest, "tar entry %q has unsupported type %q (devices, FIFOs and sockets are refused; nothing was extracted)", hdr.Name, string(hdr.Typeflag))
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

// replaceable moves a non-directory at name aside, so that a new entry
// replaces it rather than writing through a symlink.
func replaceable(j *journal, name string) error {
	fi, err := j.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errorf(api.CodeBadRequest, "tar entry %q would replace a directory (nothing was extracted)", name)
	}
	return j.moveAside(name)
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
