// Package fullfs lets sbx keep its records true on a full file system,
// where writing a new file (the temporary file of an atomic replace) fails
// with ENOSPC but rewriting the blocks an existing file already holds does
// not.
package fullfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// IsFull reports whether err says the file system (or the quota) is full.
func IsFull(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// Overwrite writes data over the existing file path in place, without
// allocating: only when data fits in the space the file already holds
// (its allocated blocks), else it fails with ENOSPC and leaves the file as
// it was. Unlike a replace it is not atomic for concurrent readers, which
// may see a mix of old and new content for a moment: callers use it only
// as the fallback of a replace that failed for lack of space.
func Overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if int64(len(data)) > st.Blocks*512 {
		return fmt.Errorf("%s: %d bytes do not fit in the %d the file holds: %w", path, len(data), st.Blocks*512, unix.ENOSPC)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(data)))
}
