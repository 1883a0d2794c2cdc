// Package privatefile writes and reads small files only root may read:
// host-side state that holds keys or secret values. Writes go through a
// temporary file and a rename; nothing is followed through a symlink, and
// a file others could read or write is refused on read.
package privatefile

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Write replaces path with data, mode 0600.
func Write(path string, data []byte) error {
	tmp := path + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Read returns the content of path, a regular file of at most maxBytes
// that no one but its owner may read or write. A missing file is an
// error that matches os.ErrNotExist.
func Read(path string, maxBytes int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() > maxBytes {
		return nil, fmt.Errorf("%s is not a private file of sbx (mode %v, %d bytes): recreate the sandbox", path, fi.Mode(), fi.Size())
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b.Bytes(), nil
}
