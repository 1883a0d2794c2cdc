package sandbox

import (
	"context"
	"io"

	"github.com/sbxrun/sbx"
)

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
