// Package fileops implements the executor's file operations: reading and
// atomic writing, directory listings, tar archives in and out (with in-root
// path resolution so no entry lands outside its target), and the text editor
// commands agents use (view, create, str_replace, insert, undo_edit).
package fileops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sbxrun/sbx/executor/api"
)

// MaxTextBytes is the largest file the editor and line reads accept.
const MaxTextBytes = 10 << 20

// MaxListEntries caps a directory listing.
const MaxListEntries = 100000

// Error is a file operation failure with an API error code.
type Error struct {
	Code  string
	Msg   string
	Lines []int
}

func (e *Error) Error() string { return e.Msg }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Files performs file operations for the sandbox's default user: new files
// and directories are owned by Owner, relative paths start at Workdir.
type Files struct {
	UID, GID int
	Workdir  string
	history  history
}

// New returns a Files with an undo history of at most historyBytes.
func New(uid, gid int, workdir string, historyBytes int) *Files {
	return &Files{UID: uid, GID: gid, Workdir: workdir, history: history{budget: historyBytes}}
}

// Resolve makes p absolute against the working directory.
func (f *Files) Resolve(p string) (string, error) {
	if p == "" {
		return "", errorf(api.CodeBadRequest, "path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", errorf(api.CodeBadRequest, "path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.Workdir, p)
	}
	return filepath.Clean(p), nil
}

// statErr turns an os error about p into an API error.
func statErr(p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf(api.CodeNotFound, "%s does not exist", p)
	case errors.Is(err, syscall.ENOTDIR):
		return errorf(api.CodeNotFound, "%s does not exist (a parent is not a directory)", p)
	case errors.Is(err, fs.ErrPermission):
		return errorf(api.CodeBadRequest, "%s: permission denied", p)
	}
	return err
}

// Open opens a regular file for reading. It opens without blocking and
// refuses anything that is not a regular file (FIFOs, devices, sockets),
// whose reads could block or never end.
func (f *Files) Open(p string) (*os.File, os.FileInfo, error) {
	// Devices are not even opened (opening some has side effects); the
	// check after the open covers a file swapped in between.
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, nil, errorf(api.CodeNotRegular, "%s is not a regular file (%s); only regular files can be read", p, fileKind(fi.Mode()))
	}
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, statErr(p, err)
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, err
	}
	if fi.IsDir() {
		fh.Close()
		return nil, nil, errorf(api.CodeIsDirectory, "%s is a directory; list it with /v1/fs/list or fetch it with /v1/fs/archive", p)
	}
	if !fi.Mode().IsRegular() {
		fh.Close()
		return nil, nil, errorf(api.CodeNotRegular, "%s is not a regular file (%s); only regular files can be read", p, fileKind(fi.Mode()))
	}
	return fh, fi, nil
}

// fileKind names the type of a non-regular file.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// ReadLines returns lines start..end (1-based, inclusive; end <= 0 means the
// last line) of a text file.
func (f *Files) ReadLines(p string, start, end int) ([]byte, error) {
	text, _, err := f.readText(p)
	if err != nil {
		return nil, err
	}
	lines := splitLines(text)
	if start < 1 {
		start = 1
	}
	if end <= 0 || end > len(lines) {
		end = len(lines)
	}
	if start > len(lines) && !(start == 1 && len(lines) == 0) || start > end && len(lines) > 0 {
		return nil, errorf(api.CodeBadRange, "line range %d-%d is outside the file's %d lines", start, end, len(lines))
	}
	var b bytes.Buffer
	for i := start; i <= end && i <= len(lines); i++ {
		b.WriteString(lines[i-1])
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// readText reads a text file for the editor: at most MaxTextBytes, valid
// UTF-8 without NUL bytes.
func (f *Files) readText(p string) (string, os.FileInfo, error) {
	fh, fi, err := f.Open(p)
	if err != nil {
		return "", nil, err
	}
	defer fh.Close()
	if fi.Size() > MaxTextBytes {
		return "", nil, errorf(api.CodeTooLarge, "%s is too large (%.1f MB); the limit is %d MB", p, float64(fi.Size())/1e6, MaxTextBytes>>20)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxTextBytes+1))
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > MaxTextBytes {
		return "", nil, errorf(api.CodeTooLarge, "%s is too large; the limit is %d MB", p, MaxTextBytes>>20)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return "", nil, errorf(api.CodeBinary, "%s is a binary file (not UTF-8 text); fetch it raw with GET /v1/files", p)
	}
	return string(data), fi, nil
}

// splitLines splits text into lines without their "\n"; a final newline
// does not start another line.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// Write replaces p atomically with the content of r: a temporary file in
// the same directory, renamed over p. Missing parents are created. An
// existing file keeps its owner and mode unless mode is set; a new one gets
// mode (default 0644) and the default owner.
func (f *Files) Write(p string, r io.Reader, mode *os.FileMode) (int64, error) {
	dir := filepath.Dir(p)
	if err := f.MkdirAll(dir); err != nil {
		return 0, err
	}
	perm := os.FileMode(0o644)
	uid, gid := f.UID, f.GID
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return 0, errorf(api.CodeIsDirectory, "%s is a directory", p)
		}
		perm = fi.Mode().Perm() | fi.Mode()&(os.ModeSticky)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	if mode != nil {
		perm = *mode
	}
	tmp, err := os.CreateTemp(dir, ".sbx-write-*")
	if err != nil {
		return 0, statErr(dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, r)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return n, fmt.Errorf("chmod %s: %w", p, err)
	}
	if os.Geteuid() == 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			return n, fmt.Errorf("chown %s: %w", p, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return n, fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return n, fmt.Errorf("rename into %s: %w", p, err)
	}
	ok = true
	return n, nil
}

// MkdirAll creates dir and its missing parents, owned by the default user.
func (f *Files) MkdirAll(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return errorf(api.CodeBadRequest, "%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return statErr(dir, err)
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := f.MkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return statErr(dir, err)
	}
	if os.Geteuid() == 0 {
		_ = os.Lchown(dir, f.UID, f.GID)
	}
	return nil
}

// List returns the entries of a directory: directories first, each group
// sorted by name.
func (f *Files) List(p string) (api.Listing, error) {
	// O_DIRECTORY: a FIFO at p is refused at once instead of blocking.
	d, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := os.Stat(p); lerr == nil && !fi.IsDir() {
			return api.Listing{}, errorf(api.CodeBadRequest, "%s is not a directory", p)
		}
		return api.Listing{}, statErr(p, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err == nil && !fi.IsDir() {
		return api.Listing{}, errorf(api.CodeBadRequest, "%s is not a directory", p)
	}
	out := api.Listing{Path: p, Entries: []api.Entry{}}
	for {
		des, err := d.ReadDir(1024)
		for _, de := range des {
			if len(out.Entries) >= MaxListEntries {
				out.Truncated = true
				break
			}
			fi, err := de.Info()
			if err != nil {
				continue
			}
			out.Entries = append(out.Entries, entryOf(fi))
		}
		if err == io.EOF || len(des) == 0 || out.Truncated {
			break
		}
		if err != nil {
			return api.Listing{}, fmt.Errorf("list %s: %w", p, err)
		}
	}
	sort.Slice(out.Entries, func(i, j int) bool {
		a, b := out.Entries[i], out.Entries[j]
		if (a.Type == "dir") != (b.Type == "dir") {
			return a.Type == "dir"
		}
		return a.Name < b.Name
	})
	return out, nil
}

func entryOf(fi os.FileInfo) api.Entry {
	t := "other"
	switch {
	case fi.Mode().IsRegular():
		t = "file"
	case fi.IsDir():
		t = "dir"
	case fi.Mode()&os.ModeSymlink != 0:
		t = "symlink"
	}
	return api.Entry{
		Name:  fi.Name(),
		Type:  t,
		Size:  fi.Size(),
		Mode:  fmt.Sprintf("%04o", unixPerm(fi.Mode())),
		Mtime: fi.ModTime().UTC().Format("2006-01-02T15:04:05.000000000Z"),
	}
}

// unixPerm returns the permission, setuid, setgid and sticky bits.
func unixPerm(m os.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}
