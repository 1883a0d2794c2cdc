// Package initbin carries the small sbx-init binary (cmd/sbx-init) inside
// the sbx binary, and writes it out once so that one-shot sandboxes can run
// it as their PID 1: it starts in a fraction of the time of the full sbx
// binary.
package initbin

import (
	"embed"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

//go:embed bin
var files embed.FS

// sampleBytes of each end of the binary name the extracted copy: they hold
// the ELF headers with Go's build ID and the end of the file.
const sampleBytes = 64 << 10

// Extract returns the path of the embedded sbx-init under dir, writing it
// there (read-only, named by its size and a checksum) the first time. ok is
// false when this build embeds no sbx-init. It never copies the whole
// binary into memory: an allocation that size would start a garbage
// collection cycle on the sandbox's start path.
func Extract(dir string) (path string, ok bool, err error) {
	f, err := files.Open("bin/sbx-init")
	if err != nil {
		return "", false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return "", false, nil
	}
	ra, canReadAt := f.(io.ReaderAt)
	if !canReadAt {
		return "", false, fmt.Errorf("embedded sbx-init cannot be read at offsets")
	}
	size := fi.Size()
	buf := make([]byte, min(sampleBytes, size))
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, off := range []int64{0, size - int64(len(buf))} {
		if _, err := ra.ReadAt(buf, off); err != nil && err != io.EOF {
			return "", false, fmt.Errorf("read embedded sbx-init: %w", err)
		}
		h.Write(buf)
	}
	path = filepath.Join(dir, "sbx-init-"+strconv.FormatUint(uint64(h.Sum32()), 16)+"-"+strconv.FormatInt(size, 10))
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		return path, true, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".sbx-init-*")
	if err != nil {
		return "", false, fmt.Errorf("write sbx-init: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, io.NewSectionReader(ra, 0, size)); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("write sbx-init: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", false, err
	}
	if err := tmp.Close(); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, fmt.Errorf("install sbx-init: %w", err)
	}
	return path, true, nil
}
