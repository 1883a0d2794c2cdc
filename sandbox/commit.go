package sandbox

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// upperDir is where rootfs.Prepare keeps the writable layer of a sandbox,
// relative to the sandbox's rootfs directory.
const upperDir = "rw/upper"

// layerExcludes are the paths sbx itself writes into every writable layer;
// they describe this sandbox, not the environment it prepared.
var layerExcludes = map[string]bool{
	".sbx":             true,
	"etc/hostname":     true,
	"etc/hosts":        true,
	"etc/resolv.conf":  true,
	"etc/.wh.hostname": true,
}

// Commit stores the sandbox's writable layer as a new layer on top of its
// image, recorded in the image cache as a new image called name, so that
// sandboxes created from name start with that state at once. A running
// sandbox is paused while its layer is read.
func (h *Host) Commit(ctx context.Context, ref, name string) (*sbx.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("%w: commit needs a name for the new image", sbx.ErrInvalid)
	}
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if sb.Image == nil || sb.Image.Digest == "" {
		return nil, fmt.Errorf("%w: sandbox %s was not created from an image (--rootfs); commit needs a base image", sbx.ErrInvalid, sb.ShortID())
	}
	switch sb.Status {
	case sbx.StatusRunning:
		ctr, err := h.container(sb)
		if err != nil {
			return nil, err
		}
		if err := ctr.Pause(); err != nil {
			return nil, fmt.Errorf("pause sandbox %s for commit: %w", sb.ShortID(), err)
		}
		defer func() { _ = ctr.Resume() }()
	case sbx.StatusPaused, sbx.StatusStopped:
	default:
		return nil, fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	upper := filepath.Join(h.store.RunDir(sb.ID), rootfsDir, upperDir)
	if _, err := os.Lstat(upper); err != nil {
		return nil, fmt.Errorf("writable layer of sandbox %s: %w", sb.ShortID(), err)
	}
	base, err := store.Resolve(sb.Image.Digest)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", sb.Image.Digest, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(exportLayer(pw, upper)) }()
	img, err := store.Commit(ctx, base, name, pr, nil)
	pr.CloseWithError(errors.New("commit stopped"))
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	return contractImage(img, false), nil
}

// exportLayer writes the overlayfs upper directory as an OCI layer tar:
// whiteouts (0:0 character devices) become .wh.<name> entries and opaque
// directories get a .wh..wh..opq entry. The directory is written by the
// sandbox and is hostile: nothing is followed, files are opened with
// O_NOFOLLOW, and only regular files, directories, symlinks and hard links
// are kept.
func exportLayer(w io.Writer, upper string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, ino) -> first name, for hard links
	err := filepath.WalkDir(upper, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(upper, full)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if layerExcludes[rel] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(full)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st == nil {
			return fmt.Errorf("stat %s: no system data", rel)
		}
		mode := fi.Mode()
		hdr := &tar.Header{
			Name:    rel,
			Mode:    int64(mode.Perm()) | int64(st.Mode&(syscall.S_ISUID|syscall.S_ISGID|syscall.S_ISVTX)),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: fi.ModTime(),
			Format:  tar.FormatPAX,
		}
		switch {
		case mode&fs.ModeCharDevice != 0 && st.Rdev == 0:
			// An overlayfs whiteout: the file was deleted.
			dir, base := filepath.Split(rel)
			return tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: fi.ModTime(), Format: tar.FormatPAX})
		case mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if opaque(full) {
				return tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: fi.ModTime(), Format: tar.FormatPAX})
			}
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(hdr)
		case mode.IsRegular():
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return tw.WriteHeader(hdr)
			}
			links[key] = rel
			f, err := os.OpenFile(full, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			if fst, err := f.Stat(); err != nil || !fst.Mode().IsRegular() {
				return fmt.Errorf("%s changed while committing", rel)
			} else {
				hdr.Size = fst.Size()
			}
			hdr.Typeflag = tar.TypeReg
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, hdr.Size)
			return err
		default:
			return nil // sockets, fifos, devices: not part of an image
		}
	})
	if err != nil {
		return fmt.Errorf("export writable layer: %w", err)
	}
	return tw.Close()
}

// opaque reports whether overlayfs marked the directory opaque: it hides
// everything below it in the lower layers.
func opaque(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		n, err := unix.Lgetxattr(dir, attr, buf)
		if err == nil && n > 0 && strings.HasPrefix(string(buf[:n]), "y") {
			return true
		}
	}
	return false
}
