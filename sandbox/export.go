package sandbox

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// Export writes the sandbox's root file system, its image with what the
// sandbox changed, to w as one tar (docker export). A running sandbox is
// paused meanwhile, so that nothing in it changes while it is read; what
// the sandbox wrote is hostile and packed as a commit packs it (nothing
// followed, only files, directories and links). Volumes and tmpfs mounts
// are not part of the root; sbx's own /.sbx and the executor's scratch
// directory are left out, and so is the egress CA (exporttrust.go). A
// sandbox in host mode is sbx.ErrUnsupported.
func (h *Host) Export(ctx context.Context, ref string, w io.Writer) error {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if sb.Image == nil && sb.Options.Rootfs == "" {
		return fmt.Errorf("%w: sandbox %s runs in host mode: its root is the host's", sbx.ErrUnsupported, sb.ShortID())
	}
	packAs, err := h.packer(sb)
	if err != nil {
		return err
	}
	resume, err := h.pauseToRead(l, sb, "export")
	if err != nil {
		return err
	}
	defer resume()
	return h.inMountNS(sb.ID, func() error {
		var st unix.Statfs_t
		if err := unix.Statfs(sb.RootPath, &st); err != nil || st.Type != unix.OVERLAYFS_SUPER_MAGIC {
			return fmt.Errorf("%w: the root of sandbox %s is not mounted (run sbx gc if it crashed)", sbx.ErrState, sb.ShortID())
		}
		trust, err := h.trustOfExport(sb)
		if err != nil {
			return err
		}
		if trust != nil {
			err = trust.pack(ctxWriter{ctx, w}, sb.RootPath, packAs)
		} else {
			err = packAs(ctxWriter{ctx, w}, sb.RootPath, exportSkip)
		}
		if err != nil {
			return fmt.Errorf("export sandbox %s: %w", sb.ShortID(), err)
		}
		return nil
	})
}

// exportSkip reports whether rel is a path sbx put into a sandbox's root
// for itself: its .sbx directory and the executor's scratch directory.
func exportSkip(rel string) bool {
	return rel == ".sbx" || (sbxOwnPath(rel) && !layerExcludes[rel])
}
