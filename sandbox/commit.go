package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

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
	img, err := h.commitLocked(ctx, l, sb, name, nil, "sbx commit", nil)
	if err != nil {
		return nil, err
	}
	return contractImage(img, false), nil
}

// commitLocked stores the writable layer of sb (locked) over its image as
// the image name, with the config cfg (nil: the base's) and the history
// line createdBy. A running sandbox is paused while its layer is read.
// The in-sandbox paths of drop stay out of the layer where the sandbox
// made them and left them empty (a build step's mount points).
func (h *Host) commitLocked(ctx context.Context, l *state.Lock, sb *sbx.Sandbox, name string, cfg *imagecache.ImageConfig, createdBy string, drop []string) (*imagecache.Image, error) {
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
	skip := h.ownPaths(sb.ID)
	err = h.inMountNS(sb.ID, func() error {
		if _, err := os.Lstat(upper); err != nil {
			return err
		}
		if stubs := mountStubs(upper, sb.Image.Layers, drop); len(stubs) > 0 {
			own := skip
			skip = func(rel string) bool { return stubs[rel] || own(rel) }
		}
		return nil
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
	go func() { pw.CloseWithError(h.inMountNS(sb.ID, func() error { return packAs(pw, upper, skip) })) }()
	img, err := store.CommitStep(ctx, base, name, pr, cfg, createdBy)
	pr.CloseWithError(errors.New("commit stopped"))
	if err != nil {
		return nil, fmt.Errorf("commit sandbox %s: %w", sb.ShortID(), err)
	}
	return img, nil
}

// mountStubs are the paths (relative to the root) of drop and their
// parents that the writable layer upper holds only as mount points: made
// by the sandbox (no lower layer has them) and left empty (an empty file,
// or a directory holding nothing but such stubs). The layer is the
// sandbox's to write: every path is resolved inside it (os.Root), so a
// symlink it planted never leads the look outside the layer.
func mountStubs(upper string, lowers, drop []string) map[string]bool {
	cand := map[string]bool{}
	for _, p := range drop {
		for rel := strings.TrimPrefix(path.Clean("/"+p), "/"); rel != "" && rel != "."; rel = path.Dir(rel) {
			cand[rel] = true
		}
	}
	stubs := map[string]bool{}
	if len(cand) == 0 {
		return stubs
	}
	root, err := os.OpenRoot(upper)
	if err != nil {
		return stubs
	}
	defer root.Close()
	rels := make([]string, 0, len(cand))
	for rel := range cand {
		rels = append(rels, rel)
	}
	// Deepest first: a directory is a stub once its children are known.
	sort.Slice(rels, func(i, j int) bool { return strings.Count(rels[i], "/") > strings.Count(rels[j], "/") })
	for _, rel := range rels {
		fi, err := root.Lstat(rel)
		if err != nil || inLowers(lowers, rel) {
			continue
		}
		switch {
		case fi.Mode().IsRegular() && fi.Size() == 0:
			stubs[rel] = true
		case fi.IsDir():
			stubs[rel] = onlyStubs(root, rel, stubs)
		}
	}
	return stubs
}

// onlyStubs reports whether the directory rel of root holds nothing but
// entries already known as stubs.
func onlyStubs(root *os.Root, rel string, stubs map[string]bool) bool {
	d, err := root.Open(rel)
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, n := range names {
		if !stubs[path.Join(rel, n)] {
			return false
		}
	}
	return true
}

// inLowers reports whether a lower layer has rel, resolved inside that
// layer.
func inLowers(lowers []string, rel string) bool {
	for _, l := range lowers {
		root, err := os.OpenRoot(l)
		if err != nil {
			continue
		}
		_, err = root.Lstat(rel)
		root.Close()
		if err == nil {
			return true
		}
	}
	return false
}
