package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox/state"
)

// contractImage is the contract's form of a cached image; full adds its
// config and layer directories (inspect).
func contractImage(img *imagecache.Image, full bool) *sbx.Image {
	out := &sbx.Image{Name: img.Name, Digest: img.Digest, Created: img.Created, Platform: img.Platform,
		SizeBytes: img.Size, DiffIDs: img.DiffIDs}
	if full {
		out.Config = img.Config.Contract()
		out.LayerDirs = img.LayerDirs
	}
	return out
}

// progressFunc adapts a contract progress callback to the image cache.
func progressFunc(progress func(sbx.PullProgress)) imagecache.ProgressFunc {
	if progress == nil {
		return nil
	}
	return func(p imagecache.Progress) { progress(pullProgress(p)) }
}

// PullImage fetches ref from its registry into the cache under Root.
func (h *Host) PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := store.Pull(ctx, ref, progressFunc(progress))
	if err != nil {
		return nil, err
	}
	h.publish(sbx.Event{Type: sbx.EventImagePulled, Image: img.Name})
	return contractImage(img, false), nil
}

// ImportImage adds an image from an OCI layout or archive, a docker save
// tar or a root file system tarball: o.Path on this machine, or o.Archive
// streamed (spooled to a file in the cache's root, not its tmp/, which GC
// empties). An archive the cache cannot read is sbx.ErrInvalid.
func (h *Host) ImportImage(ctx context.Context, o sbx.ImportOptions) (*sbx.Image, error) {
	return h.importImage(ctx, o, h.cfg.Policy)
}

// importImage checks o.Path against policy: a remote or driver caller must
// not import arbitrary host files.
func (h *Host) importImage(ctx context.Context, o sbx.ImportOptions, policy *sbx.Policy) (*sbx.Image, error) {
	if o.Path != "" && policy != nil {
		real, err := allowedHostPath(policy, o.Path, "import path")
		if err != nil {
			return nil, err
		}
		o.Path = real
	}
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	path := o.Path
	if path == "" {
		if o.Archive == nil {
			return nil, fmt.Errorf("%w: import needs a path or an archive", sbx.ErrInvalid)
		}
		// Held from the upload on, so that gc (RemoveDebris) removes
		// only the archives of importers that died.
		release, err := store.Hold(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		f, err := os.CreateTemp(store.Root(), imagecache.Upload+"*")
		if err != nil {
			return nil, fmt.Errorf("store the archive: %w", err)
		}
		defer os.Remove(f.Name())
		_, err = io.Copy(f, o.Archive)
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("receive the archive: %w", err)
		}
		path = f.Name()
	}
	shown := o.Path
	if shown == "" {
		shown = "the archive" // not the temporary file it was stored in
	}
	imgs, err := store.ImportAll(ctx, path, shown, o.Name, progressFunc(o.Progress))
	if err != nil {
		if o.Path == "" && ctx.Err() == nil && !isContractError(err) {
			err = fmt.Errorf("%w: import: %w", sbx.ErrInvalid, err)
		}
		return nil, err
	}
	out := contractImage(imgs[0], false)
	for _, img := range imgs {
		h.publish(sbx.Event{Type: sbx.EventImagePulled, Image: img.Name})
		if len(imgs) > 1 {
			out.Loaded = append(out.Loaded, *contractImage(img, false))
		}
	}
	return out, nil
}

// isContractError reports whether err wraps one of the contract's errors.
func isContractError(err error) bool {
	for _, e := range []error{sbx.ErrImageNotFound, sbx.ErrInvalid, sbx.ErrForbidden, sbx.ErrLimit, sbx.ErrRegistryAuth, sbx.ErrRegistryUnreachable, sbx.ErrUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ListImages returns the cached images.
func (h *Host) ListImages(ctx context.Context) ([]sbx.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	list, err := store.List()
	if err != nil {
		return nil, err
	}
	out := make([]sbx.Image, 0, len(list))
	for _, img := range list {
		out = append(out, *contractImage(img, false))
	}
	return out, nil
}

// InspectImage returns one cached image in full.
func (h *Host) InspectImage(ctx context.Context, ref string) (*sbx.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := store.Resolve(ref)
	if err != nil {
		return nil, err
	}
	return contractImage(img, true), nil
}

// RemoveImage drops ref from the cache; its layers stay until GCImages.
func (h *Host) RemoveImage(ctx context.Context, ref string) error {
	store, err := h.imageStore()
	if err != nil {
		return err
	}
	if _, err := store.Remove(ctx, ref); err != nil {
		return err
	}
	h.publish(sbx.Event{Type: sbx.EventImageRemoved, Image: ref})
	return nil
}

// GCImages removes the layers that no image uses, keeping those of every
// sandbox on record, stopped ones included (their next start needs them),
// and those of live runs. It refuses while a sandbox record is unreadable.
func (h *Host) GCImages(ctx context.Context) (*sbx.ImageGCReport, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	res, err := store.GC(ctx, h.imageLayers)
	if err != nil {
		return nil, err
	}
	return &sbx.ImageGCReport{RemovedLayers: nonNil(res.RemovedLayers), FreedBytes: res.FreedBytes, KeptInUse: nonNil(res.KeptInUse)}, nil
}

// imageLayers returns the image layer directories of every sandbox on
// record, running or stopped (a stopped sandbox's overlay is not mounted
// but its next start needs them), and of the live one-shot runs under the
// run root: image GC must keep them. Mounts do not name their layers (see
// rootfs), so a record that cannot be read is an error: its layers are
// unknown and GC must remove nothing.
func (h *Host) imageLayers() ([]string, error) {
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return nil, fmt.Errorf("read sandbox records: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		switch {
		case e.Err == nil:
			if e.Record.Image != nil {
				dirs = append(dirs, e.Record.Image.Layers...)
			}
		case errors.Is(e.Err, state.ErrCorruptRecord):
			return nil, fmt.Errorf("the record of sandbox %s is unreadable, so the image layers it uses are unknown; sbx rm -f it first: %w", e.ID, e.Err)
		}
	}
	runs, err := liveRunLayers(h.store.RunRoot())
	if err != nil {
		return nil, err
	}
	return append(dirs, runs...), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TagImage gives the cached image source the further name target
// (NAME[:TAG]), sharing its layers; an image named target before loses
// that name.
func (h *Host) TagImage(ctx context.Context, source, target string) (*sbx.Image, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	img, err := store.Tag(ctx, source, target)
	if err != nil {
		return nil, err
	}
	h.publish(sbx.Event{Type: sbx.EventImageTagged, Image: img.Name})
	return contractImage(img, false), nil
}

// ImageHistory says how the cached image ref was built, newest step
// first; an image whose config has no usable history gets one line per
// layer.
func (h *Host) ImageHistory(ctx context.Context, ref string) ([]sbx.ImageHistoryEntry, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	lines, err := store.History(ref)
	if err != nil {
		return nil, err
	}
	out := make([]sbx.ImageHistoryEntry, len(lines))
	for i, l := range lines {
		out[i] = sbx.ImageHistoryEntry{Created: l.Created, CreatedBy: l.CreatedBy, Comment: l.Comment,
			EmptyLayer: l.EmptyLayer, DiffID: l.DiffID, SizeBytes: l.SizeBytes}
	}
	return out, nil
}

// SaveImage writes the cached images refs to w as one OCI archive, each
// named by its reference. Its layers are packed again from the unpacked
// cache: their digests differ from the registry's, their contents do not.
func (h *Host) SaveImage(ctx context.Context, refs []string, w io.Writer) error {
	store, err := h.imageStore()
	if err != nil {
		return err
	}
	return store.Save(ctx, refs, w)
}
