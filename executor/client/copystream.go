package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/internal/copyout"
)

// copyIntoExisting writes the regular file src of the sandbox into the
// existing non-directory dst (fi is its stat, symlinks followed), as cp
// does: a regular file keeps its inode, mode and links; a character
// device (/dev/null, a terminal) or a pipe (/dev/stdout of a pipeline) is
// written to. Sockets, block devices and other special files are refused
// and left alone.
func copyIntoExisting(ctx context.Context, c *Client, src, dst string, fi fs.FileInfo) error {
	m := fi.Mode()
	if !m.IsRegular() && m&fs.ModeCharDevice == 0 && m&fs.ModeNamedPipe == 0 {
		return fmt.Errorf("%w: %s is a special file (%s); sbx cp writes only into regular files, character devices and pipes", sbx.ErrInvalid, dst, m.Type())
	}
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("copy %s from sandbox: %w", src, err)
	}
	// Checked again on the open file: dst may have changed meanwhile.
	if now, err := f.Stat(); err != nil || now.Mode().Type() != m.Type() {
		f.Close()
		return fmt.Errorf("%w: %s changed while it was opened", sbx.ErrInvalid, dst)
	}
	pr, pw := io.Pipe()
	fetchErr := make(chan error, 1)
	go func() {
		_, err := c.GetArchive(ctx, src, pw, MaxCopyBytes)
		pw.CloseWithError(err)
		fetchErr <- err
	}()
	err = copyout.WriteInto(pr, path.Base(src), f, MaxCopyBytes)
	pr.CloseWithError(errors.New("copy stopped"))
	if ferr := <-fetchErr; ferr != nil && err == nil {
		err = ferr
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s from sandbox: %w", src, noSuchFile(err))
	}
	return nil
}

// CopyFromStream writes the file or directory src (absolute) inside a
// sandbox to w as a tar stream, as `docker cp ID:src -` does. The stream is
// the sandbox's, passed on unchecked but capped at MaxCopyBytes: whoever
// unpacks it must treat it as hostile.
func CopyFromStream(ctx context.Context, c *Client, src string, w io.Writer) error {
	if !path.IsAbs(src) {
		return fmt.Errorf("%w: sandbox path %q must be absolute", sbx.ErrInvalid, src)
	}
	if _, err := c.GetArchive(ctx, path.Clean(src), w, MaxCopyBytes); err != nil {
		return fmt.Errorf("copy %s from sandbox: %w", src, noSuchFile(err))
	}
	return nil
}

// CopyToStream unpacks the tar stream r into the existing directory dst
// (absolute) inside a sandbox, as `docker cp - ID:dst` does. The executor
// unpacks it inside the sandbox, refusing escapes.
func CopyToStream(ctx context.Context, c *Client, r io.Reader, dst string) error {
	if !path.IsAbs(dst) {
		return fmt.Errorf("%w: sandbox path %q must be absolute", sbx.ErrInvalid, dst)
	}
	dst = path.Clean(dst)
	if _, err := c.List(ctx, dst); err != nil {
		return fmt.Errorf("%w: %s in the sandbox must be an existing directory to unpack a tar stream into (%w)", sbx.ErrInvalid, dst, err)
	}
	if _, err := c.PutArchive(ctx, dst, r); err != nil {
		return fmt.Errorf("copy a tar stream into sandbox: %w", noSuchFile(err))
	}
	return nil
}

// DialSandbox returns a client of the executor of the sandbox ref of s
// (local or remote, through s.Dial) and the sandbox's working directory;
// the caller closes the client.
func DialSandbox(ctx context.Context, s sbx.Sandboxes, ref string) (*Client, string, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	if sb.Status != sbx.StatusRunning {
		return nil, "", fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	wd := sb.Options.Workdir
	if wd == "" && sb.Image != nil {
		wd = sb.Image.Workdir
	}
	id := sb.ID
	return NewWithDialer(func(ctx context.Context) (net.Conn, error) { return s.Dial(ctx, id) }, Options{}), wd, nil
}

// StreamFrom writes the file or directory p (relative to the working
// directory) of the sandbox ref of s to w as a tar stream (sbx cp ID:p -).
func StreamFrom(ctx context.Context, s sbx.Sandboxes, ref, p string, w io.Writer) error {
	c, wd, err := DialSandbox(ctx, s, ref)
	if err != nil {
		return err
	}
	defer c.Close()
	return CopyFromStream(ctx, c, InDir(wd, p), w)
}

// StreamTo unpacks the tar stream r into the directory p (relative to the
// working directory) of the sandbox ref of s (sbx cp - ID:p).
func StreamTo(ctx context.Context, s sbx.Sandboxes, ref string, r io.Reader, p string) error {
	c, wd, err := DialSandbox(ctx, s, ref)
	if err != nil {
		return err
	}
	defer c.Close()
	return CopyToStream(ctx, c, r, InDir(wd, p))
}

// Copy copies between a sandbox of s and this machine as `sbx cp SRC DST`
// does: exactly one of src and dst is ID:PATH (see
// dockerargs.SplitCopyPath); a host side of - is a tar stream on stdout or
// from stdin.
func Copy(ctx context.Context, s sbx.Sandboxes, src, dst string, stdin io.Reader, stdout io.Writer) error {
	srcRef, srcPath, srcIn := dockerargs.SplitCopyPath(src)
	dstRef, dstPath, dstIn := dockerargs.SplitCopyPath(dst)
	switch {
	case srcIn == dstIn:
		return fmt.Errorf("%w: give ID:PATH on exactly one side of sbx cp", sbx.ErrInvalid)
	case srcIn && dst == "-":
		return StreamFrom(ctx, s, srcRef, srcPath, stdout)
	case srcIn:
		return s.CopyFrom(ctx, srcRef, srcPath, dst)
	case src == "-":
		return StreamTo(ctx, s, dstRef, stdin, dstPath)
	}
	return s.CopyTo(ctx, dstRef, src, dstPath)
}
