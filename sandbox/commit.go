package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox/state"
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
	if _, err := h.imageStore(); err != nil {
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
	img, err := h.commitLocked(ctx, l, sb, name, nil, "sbx commit")
	if err != nil {
		return nil, err
	}
	return contractImage(img, false), nil
}

// commitLocked stores the writable layer of sb (locked) over its image as
// the image name, with the config cfg (nil: the base's) and the history
// line createdBy. A running sandbox is paused while its layer is read.
func (h *Host) commitLocked(ctx context.Context, l *state.Lock, sb *sbx.Sandbox, name string, cfg *imagecache.ImageConfig, createdBy string) (*imagecache.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	if sb.Image == nil || sb.Image.Digest == "" {
		return nil, fmt.Errorf("%w: sandbox %s was not created from an image (--rootfs); commit needs a base image", sbx.ErrInvalid, sb.ShortID())
	}
	resume, err := h.pauseToRead(l, sb, "commit")
	if err != nil {
		return nil, err
	}
	defer resume()
	upper := filepath.Join(h.store.RunDir(sb.ID), rootfsDir, upperDir)
	err = h.inMountNS(sb.ID, func() error {
		_, err := os.Lstat(upper)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("writable layer of sandbox %s: %w", sb.ShortID(), err)
	}
	base, err := store.Resolve(sb.Image.Digest)
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", sb.Image.Digest, err)
	}
	packAs, err := h.packer(sb)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(h.inMountNS(sb.ID, func() error { return packAs(pw, upper, h.ownPaths(sb.ID)) }))
	}()
	img, err := store.CommitStep(ctx, base, name, pr, cfg, createdBy)
	pr.CloseWithError(errors.New("commit stopped"))
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	return img, nil
}
