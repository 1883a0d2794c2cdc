package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/rootfs"
)

// sbxOwnPath reports whether rel (relative to the root) is a file sbx
// itself writes into every sandbox: those of layerExcludes and the
// executor's scratch directory (executor.Server's .sbx-executor-*, in the
// first writable of /tmp, /dev/shm, /run, /var/tmp).
func sbxOwnPath(rel string) bool {
	if layerExcludes[rel] {
		return true
	}
	dir, base := path.Split(rel)
	switch dir {
	case "tmp/", "dev/shm/", "run/", "var/tmp/":
		return strings.HasPrefix(base, ".sbx-executor-")
	}
	return false
}

// Diff lists what the sandbox changed in its root file system over its
// image (or --rootfs directory), as docker diff does: the paths of its
// writable layer, Added, Changed or Deleted, sorted, leaving out the files
// sbx itself writes (/etc/hosts, /etc/hostname, /etc/resolv.conf). A
// sandbox in host mode has no single lower layer to compare with and is
// sbx.ErrUnsupported.
func (h *Host) Diff(ctx context.Context, ref string) ([]sbx.Change, error) {
	h.removeExpired(ctx)
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	var lowers []string
	switch {
	case sb.Image != nil:
		lowers = sb.Image.Layers
	case sb.Options.Rootfs != "":
		lowers = []string{sb.Options.Rootfs}
	default:
		return nil, fmt.Errorf("%w: sandbox %s runs in host mode: its root is the host's, there is no image to compare with", sbx.ErrUnsupported, sb.ShortID())
	}
	resume, err := h.pauseToRead(l, sb, "diff")
	if err != nil {
		return nil, err
	}
	defer resume()
	upper := rootfs.UpperDir(filepath.Join(h.store.RunDir(sb.ID), rootfsDir))
	var changes []rootfs.Change
	err = h.inMountNS(sb.ID, func() (err error) {
		changes, err = rootfs.Changes(upper, lowers, h.ownPaths(sb.ID), maxChanges)
		return err
	})
	if err != nil {
		if errors.Is(err, rootfs.ErrTooManyChanges) {
			return nil, fmt.Errorf("%w: sandbox %s: %w", sbx.ErrLimit, sb.ShortID(), err)
		}
		return nil, fmt.Errorf("diff sandbox %s: %w", sb.ShortID(), err)
	}
	out := make([]sbx.Change, len(changes))
	for i, c := range changes {
		out[i] = sbx.Change{Kind: c.Kind, Path: c.Path}
	}
	return out, nil
}
