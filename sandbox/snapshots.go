package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/sbxrun/sbx"
)

// ListSnapshots returns the snapshots of this host's root, oldest first
// (their files are not checked: Restore and InspectSnapshot do).
func (h *Host) ListSnapshots(ctx context.Context) ([]*sbx.Snapshot, error) {
	names, err := h.snapshotNames()
	if err != nil {
		return nil, err
	}
	var out []*sbx.Snapshot
	for _, name := range names {
		snap, err := readSnapshot(h.snapshotDir(name))
		if err != nil {
			h.log.Warn("unreadable snapshot", "name", name, "err", err)
			continue
		}
		out = append(out, snap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// InspectSnapshot returns one snapshot after checking its files.
func (h *Host) InspectSnapshot(ctx context.Context, name string) (*sbx.Snapshot, error) {
	snap, _, err := h.loadSnapshot(name)
	return snap, err
}

// RemoveSnapshot deletes a snapshot and its files. A sandbox stopped by a
// checkpoint into it then starts anew instead of resuming.
func (h *Host) RemoveSnapshot(ctx context.Context, name string) error {
	if err := sbx.ValidSnapshotName(name); err != nil {
		return err
	}
	dir := h.snapshotDir(name)
	if _, err := os.Lstat(filepath.Join(dir, snapshotFile)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: no snapshot %q (sbx snapshot ls)", sbx.ErrNoSuchFile, name)
	}
	// Moved out of place in one step, then deleted: a crash midway leaves
	// a partial directory for gc, never half a snapshot.
	tmp, err := os.MkdirTemp(h.snapshotsRoot(), partialPrefix+"rm-")
	if err != nil {
		return err
	}
	if err := os.Rename(dir, filepath.Join(tmp, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("remove snapshot %q: %w", name, err)
	}
	return os.RemoveAll(tmp)
}

// ExportSnapshot writes a snapshot, checked, to w as one tar file that
// ImportSnapshot reads on any host.
func (h *Host) ExportSnapshot(ctx context.Context, name string, w io.Writer) error {
	snap, _, err := h.loadSnapshot(name)
	if err != nil {
		return err
	}
	return exportSnapshot(h.snapshotDir(name), snap, w)
}

// ImportSnapshot reads a tar written by ExportSnapshot into a new snapshot
// called name (the archive's own name when empty), checking every file
// against the digests its record lists. On error nothing is left.
func (h *Host) ImportSnapshot(ctx context.Context, r io.Reader, name string) (*sbx.Snapshot, error) {
	if err := os.MkdirAll(h.snapshotsRoot(), 0o700); err != nil {
		return nil, err
	}
	p, err := h.newPartialSnapshot("import")
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			p.discard()
		}
	}()
	if err := importSnapshotFiles(r, p.dir); err != nil {
		return nil, err
	}
	snap, err := readSnapshot(p.dir)
	if err != nil {
		return nil, err
	}
	if name != "" {
		snap.Name = name
	}
	if err := sbx.ValidSnapshotName(snap.Name); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(p.dir, snapshotFile)); err != nil {
		return nil, err
	}
	// The archive's files must be exactly those its record lists;
	// commitSnapshot then writes the record (with the new name).
	if err := verifySnapshot(p.dir, snap); err != nil {
		return nil, err
	}
	if err := h.commitSnapshot(p, snap); err != nil {
		return nil, err
	}
	committed = true
	return snap, nil
}
