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
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
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
// otherwise to dst itself. Everything arrives as a tar stream and is
// written with in-root path resolution (os.Root), so entries cannot land
// outside the destination whatever the sandbox sends; device nodes are
// refused, setuid bits dropped, ownership not kept, and the stream is
// capped at MaxCopyBytes. A path missing in the sandbox is
// sbx.sbx.ErrNoSuchFile.
func CopyFrom(ctx context.Context, c *Client, src, dst string) error {
	if !path.IsAbs(src) {
		return fmt.Errorf("%w: sandbox path %q must be absolute", sbx.ErrInvalid, src)
	}
	dst, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	dir, rename := dst, ""
	if fi, err := os.Stat(dst); err != nil || !fi.IsDir() {
		dir, rename = filepath.Dir(dst), filepath.Base(dst)
	}
	pr, pw := io.Pipe()
	fetchErr := make(chan error, 1)
	go func() {
		_, err := c.GetArchive(ctx, path.Clean(src), pw, MaxCopyBytes)
		pw.CloseWithError(err)
		fetchErr <- err
	}()
	err = extractTar(pr, dir, rename)
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

// extractTar unpacks a tar stream from a sandbox into dir. When rename is
// set, the first component of every entry name is replaced by it (copying
// to a new name). Every path is resolved inside dir with os.Root.
func extractTar(r io.Reader, dir, rename string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	defer root.Close()
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirTimes []dirTime
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar stream: %w", err)
		}
		name, err := cleanEntry(hdr.Name, rename)
		if err != nil {
			return err
		}
		mode := fs.FileMode(hdr.Mode).Perm() // no setuid, setgid or sticky bits from a sandbox
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			if err := root.Chmod(name, mode|0o700); err != nil {
				return err
			}
			dirTimes = append(dirTimes, dirTime{name, hdr.ModTime})
		case tar.TypeReg:
			if err := mkParent(root, name); err != nil {
				return err
			}
			_ = root.Remove(name) // replace, never write through an existing symlink
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			_, cerr := io.Copy(f, tr)
			if err := errors.Join(cerr, f.Close()); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		case tar.TypeSymlink:
			if err := mkParent(root, name); err != nil {
				return err
			}
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("create symlink %s: %w", name, err)
			}
		case tar.TypeLink:
			target, err := cleanEntry(hdr.Linkname, rename)
			if err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			_ = root.Remove(name)
			if err := root.Link(target, name); err != nil {
				return fmt.Errorf("create hard link %s: %w", name, err)
			}
		default:
			return fmt.Errorf("refusing tar entry %q of type %q (devices, fifos and the like are not copied)", hdr.Name, string(hdr.Typeflag))
		}
	}
	for i := len(dirTimes) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirTimes[i].name, dirTimes[i].t, dirTimes[i].t)
	}
	return nil
}

// cleanEntry validates a tar entry name (relative, no "..") and applies
// the rename of its first component.
func cleanEntry(name, rename string) (string, error) {
	clean := path.Clean(strings.TrimSuffix(name, "/"))
	if name == "" || path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
		return "", fmt.Errorf("refusing tar entry %q: not a relative path inside the copy", name)
	}
	if rename != "" {
		_, rest, _ := strings.Cut(clean, "/")
		clean = path.Join(rename, rest)
	}
	return clean, nil
}

func mkParent(root *os.Root, name string) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
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
