package imagecache

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/sbxrun/sbx"
)

// Tag gives the cached image src a further name dst (NAME[:TAG], not a
// digest), as docker tag does: the layers are shared, nothing is copied,
// and an image dst named before loses that name.
func (s *Store) Tag(ctx context.Context, src, dst string) (*Image, error) {
	r, err := s.canonicalName(dst)
	if err != nil {
		return nil, err
	}
	if _, ok := r.(name.Digest); ok {
		return nil, fmt.Errorf("%w: tag %q names a digest; give NAME[:TAG]", sbx.ErrInvalid, dst)
	}
	var out *Image
	err = s.updateIndex(ctx, func(idx *index) error {
		rec, err := s.find(idx, src)
		if err != nil {
			return err
		}
		tagged := *rec
		tagged.Name = r.Name()
		tagged.Layers = append([]layerRec(nil), rec.Layers...)
		tagged.Stored = time.Now().UTC()
		kept := idx.Images[:0]
		for _, other := range idx.Images {
			if other.Name != tagged.Name {
				kept = append(kept, other)
			}
		}
		idx.Images = append(kept, tagged)
		out = s.image(&idx.Images[len(idx.Images)-1])
		return nil
	})
	return out, err
}

// HistoryEntry is one step of how an image was built, from its config's
// history: when, the command that made it, a comment, and whether it made
// no layer (ENV, CMD...).
type HistoryEntry struct {
	Created    time.Time `json:"created,omitzero"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Comment    string    `json:"comment,omitempty"`
	EmptyLayer bool      `json:"empty_layer,omitempty"`
}

// HistoryLine is a step of History with the layer it made: its diffID and
// unpacked size ("" and 0 for a step that made none).
type HistoryLine struct {
	HistoryEntry
	DiffID    string `json:"diff_id,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
}

// History returns how the image ref was built, newest step first, as
// docker history prints it. Images whose config has no history (or one
// that does not match their layers) get one line per layer.
func (s *Store) History(ref string) ([]HistoryLine, error) {
	rec, err := s.lookup(ref)
	if err != nil {
		return nil, err
	}
	var lines []HistoryLine
	layers := rec.Layers
	if rec.historyMatches() {
		for _, h := range rec.History {
			line := HistoryLine{HistoryEntry: h}
			if !h.EmptyLayer {
				line.DiffID, line.SizeBytes = layers[0].DiffID, layers[0].Size
				layers = layers[1:]
			}
			lines = append(lines, line)
		}
	} else {
		for _, l := range layers {
			lines = append(lines, HistoryLine{DiffID: l.DiffID, SizeBytes: l.Size})
		}
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return lines, nil
}

// historyMatches reports whether the record's history has one step that
// made a layer for each of its layers, so that the two can be paired.
func (r *record) historyMatches() bool {
	steps := 0
	for _, h := range r.History {
		if !h.EmptyLayer {
			steps++
		}
	}
	return steps == len(r.Layers)
}
