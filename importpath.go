package sbx

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckImportPath checks ImportOptions.Path before anything is read or
// sent, so that a local and a remote import refuse the same paths with the
// same error: the path must exist, and a directory must be an OCI image
// layout (it has an index.json). Anything else is ErrInvalid, saying what
// to do; a root file system directory is tarred first. It reports whether
// the path is a directory (a layout).
func CheckImportPath(path string) (isDir bool, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("%w: import: %w", ErrInvalid, err)
	}
	if !st.IsDir() {
		return false, nil
	}
	if _, err := os.Stat(filepath.Join(path, "index.json")); err != nil {
		return true, fmt.Errorf("%w: import %s: the directory is not an OCI image layout (it has no index.json); to import a root file system directory, tar it first (tar -C %s -cf rootfs.tar .) and import the tar", ErrInvalid, path, path)
	}
	return true, nil
}
