package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/internal/copyout"
)

// MaxCopyBytes caps the tar stream of one CopyFrom: the sandbox decides
// what it sends, so the host never takes an unbounded amount.
const MaxCopyBytes = 8 << 30

// noSuchFile turns the executor's not_found reply into sbx.ErrNoSuchFile.
func noSuchFile(err error) error {
	if IsCode(err, api.CodeNotFound) {
		return fmt.Errorf("%w in the sandbox (%w)", sbx.ErrNoSuchFile, err)
	}
	return err
}

// CopyFrom copies the file or directory at src (absolute) inside a
// sandbox to dst on this machine, through the sandbox's executor c, as
// `docker cp ID:src dst` does: into dst when dst is an existing directory,
// written into dst when it is an existing file (a regular file, a
// character device, a pipe; other special files are refused), otherwise
// to dst itself. Everything arrives as a tar stream, which is
// hostile: package copyout extracts it into a staging directory without
// ever following a symlink, refuses devices and escapes, drops setuid bits
// and ownership, caps sizes (the stream at MaxCopyBytes), and installs the
// result only when it is complete. A path missing in the sandbox is
// sbx.ErrNoSuchFile.
func CopyFrom(ctx context.Context, c *Client, src, dst string) error {
	if !path.IsAbs(src) {
		return fmt.Errorf("%w: sandbox path %q must be absolute", sbx.ErrInvalid, src)
	}
	dst, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	src = path.Clean(src)
	top := path.Base(src) // "/" for the whole root
	dir, name := dst, top
	fi, err := os.Stat(dst)
	if err == nil && !fi.IsDir() {
		return copyIntoExisting(ctx, c, src, dst, fi)
	}
	if err == nil {
		if top == "/" {
			return fmt.Errorf("%w: copy the sandbox's / to a new directory, not into the existing %s", sbx.ErrInvalid, dst)
		}
	} else {
		dir, name = filepath.Dir(dst), filepath.Base(dst)
	}
	pr, pw := io.Pipe()
	fetchErr := make(chan error, 1)
	go func() {
		_, err := c.GetArchive(ctx, src, pw, MaxCopyBytes)
		pw.CloseWithError(err)
		fetchErr <- err
	}()
	// What the sandbox sends is extracted by the rules of a hostile layer
	// and installed only when complete (package copyout).
	err = copyout.Extract(pr, top, dir, name, copyout.Limits{MaxBytes: MaxCopyBytes})
	pr.CloseWithError(errors.New("extraction stopped"))
	if ferr := <-fetchErr; ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("copy %s from sandbox: %w", src, noSuchFile(err))
	}
	return nil
}

// CopyTo copies the file or directory src on this machine into a sandbox
// at dst (absolute), through the sandbox's executor c: into dst when it is
// an existing directory there, otherwise to dst itself. The executor
// unpacks it inside the sandbox, refusing escapes.
func CopyTo(ctx context.Context, c *Client, src, dst string) error {
	if !path.IsAbs(dst) {
		return fmt.Errorf("%w: sandbox path %q must be absolute", sbx.ErrInvalid, dst)
	}
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(src); err != nil {
		return fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	dst = path.Clean(dst)
	dir, name := dst, filepath.Base(src)
	if _, err := c.List(ctx, dst); err != nil {
		dir, name = path.Dir(dst), path.Base(dst)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, src, name)) }()
	_, err = c.PutArchive(ctx, dir, pr)
	pr.CloseWithError(errors.New("upload stopped"))
	if err != nil {
		return fmt.Errorf("copy %s into sandbox: %w", src, noSuchFile(err))
	}
	return nil
}

// writeTar writes src (a file or a directory tree) to w as a tar whose
// entries start with name. Symlinks are stored, not followed.
func writeTar(w io.Writer, src, name string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(src, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, full)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(full); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(filepath.Join(name, rel))
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(full)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// InDir makes the sandbox path p absolute against the working directory
// wd (/ when empty), as the sandbox's commands see it.
func InDir(wd, p string) string {
	if path.IsAbs(p) {
		return p
	}
	if !path.IsAbs(wd) {
		wd = "/"
	}
	return path.Join(wd, p)
}
