package copyout

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// WriteFile writes path (mode 0644) with what write produces, through a
// temporary file beside it renamed over path only when write succeeded:
// an archive or a tar written out of a sandbox (sbx export -o, sbx save
// -o) appears complete or not at all.
func WriteFile(path string, write func(io.Writer) error) error {
	return WriteFileMode(path, 0o644, write)
}

// WriteFileMode is WriteFile giving the file mode perm. The temporary file
// is unnamed (O_TMPFILE) while it is written, so a process killed midway
// leaves nothing behind; it gets a name beside path only to be renamed
// over it. A file system without O_TMPFILE gets a named temporary file.
func WriteFileMode(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return writeNamedTemp(path, perm, write)
		}
		return &os.PathError{Op: "create a file in", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	err = write(f)
	if err == nil {
		err = f.Chmod(perm) // the umask applied at the open
	}
	if err == nil {
		err = linkOver(f, path)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkOver gives the unnamed file f the name path: a link under a fresh
// temporary name beside path, renamed over it.
func linkOver(f *os.File, path string) error {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b))
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "link", Old: src, New: tmp, Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeNamedTemp is WriteFileMode through a named temporary file.
func writeNamedTemp(path string, perm os.FileMode, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), perm); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
