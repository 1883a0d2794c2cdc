package copyout

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"strings"
)

// WriteInto reads a tar stream that must hold exactly one regular file
// named top and writes its content into f, an existing file the caller
// opened for writing (a regular file, a character device such as
// /dev/null, a pipe), as cp writes into an existing destination. A regular
// f is truncated only once the stream has proved to hold a file, so a
// failed copy leaves it as it was. At most max bytes are written.
func WriteInto(r io.Reader, top string, f *os.File, max int64) error {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err == io.EOF {
		return refused("the stream holds nothing")
	}
	if err != nil {
		return fmt.Errorf("read the tar stream: %w", err)
	}
	if strings.TrimSuffix(hdr.Name, "/") != top {
		return refused("entry %q is not %q, the name copied", sanitize(hdr.Name), sanitize(top))
	}
	if hdr.Typeflag != tar.TypeReg {
		return fmt.Errorf("cannot write %s, which is not a regular file, into the existing file %s", sanitize(top), f.Name())
	}
	if hdr.Size > max {
		return refused("%q is larger than %d bytes", sanitize(top), max)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	if _, err := io.Copy(f, io.LimitReader(tr, hdr.Size)); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if _, err := tr.Next(); err != io.EOF {
		return refused("the stream holds more than the file %q", sanitize(top))
	}
	return nil
}
