package copyout

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes path (mode 0644) with what write produces, through a
// temporary file beside it renamed over path only when write succeeded:
// an archive or a tar written out of a sandbox (sbx export -o, sbx save
// -o) appears complete or not at all.
func WriteFile(path string, write func(io.Writer) error) error {
	return WriteFileMode(path, 0o644, write)
}

// WriteFileMode is WriteFile giving the file mode perm.
func WriteFileMode(path string, perm os.FileMode, write func(io.Writer) error) error {
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
