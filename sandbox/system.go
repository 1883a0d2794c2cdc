package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// DiskUsage says what the image cache and the sandboxes on record hold:
// the cached images' layers (each once, sized as unpacked), the part no
// sandbox uses, and what the sandboxes' writable layers (tmpfs) hold.
func (h *Host) DiskUsage(ctx context.Context) (*sbx.DiskUsage, error) {
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	images, err := store.List()
	if err != nil {
		return nil, err
	}
	entries, err := state.ReadAll[sbx.Sandbox](h.store)
	if err != nil {
		return nil, fmt.Errorf("read sandbox records: %w", err)
	}
	var du sbx.DiskUsage
	usedDirs, usedDigests := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if e.Err != nil {
			continue
		}
		sb := &e.Record
		du.Sandboxes++
		if sb.Image != nil {
			usedDigests[sb.Image.Digest] = true
			for _, d := range sb.Image.Layers {
				usedDirs[d] = true
			}
		}
		switch {
		case sb.State() == sbx.StatusExited: // stopped, or its main command ended
			n := h.writableBytes(sb.ID)
			du.WritableBytes += n
			du.StoppedWritableBytes += n
		case sb.Status == sbx.StatusRunning, sb.Status == sbx.StatusPaused:
			du.SandboxesRunning++
			du.WritableBytes += h.writableBytes(sb.ID)
		}
	}
	counted := map[string]bool{}
	nonBuild := map[string]bool{}
	for _, img := range images {
		if !isBuildStep(img.Name) {
			for _, d := range img.LayerDirs {
				nonBuild[d] = true
			}
		}
	}
	buildCounted := map[string]bool{}
	for _, img := range images {
		if isBuildStep(img.Name) {
			du.BuildCacheImages++
		}
		du.Images++
		if usedDigests[img.Digest] {
			du.ImagesInUse++
		}
		steps, err := store.History(img.Digest)
		if err != nil {
			continue // removed meanwhile
		}
		size := map[string]int64{}
		for _, s := range steps {
			size[s.DiffID] = s.SizeBytes
		}
		for i, dir := range img.LayerDirs {
			if counted[dir] || i >= len(img.DiffIDs) {
				continue
			}
			counted[dir] = true
			if !nonBuild[dir] && !buildCounted[dir] {
				buildCounted[dir] = true
				du.BuildCacheBytes += size[img.DiffIDs[i]]
			}
			du.LayersBytes += size[img.DiffIDs[i]]
			if !usedDirs[dir] {
				du.ReclaimableBytes += size[img.DiffIDs[i]]
			}
		}
	}
	du.BuildCacheMountBytes = buildEngine{h}.cacheMountBytes()
	return &du, nil
}

// writableBytes is what the sandbox's writable layer (its tmpfs) holds,
// read from the file system rather than by walking what the sandbox wrote.
func (h *Host) writableBytes(id string) int64 {
	var st unix.Statfs_t
	err := h.inMountNS(id, func() error {
		return unix.Statfs(filepath.Join(h.store.RunDir(id), rootfsDir, "rw"), &st)
	})
	if err != nil || st.Type != unix.TMPFS_MAGIC {
		return 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// Prune removes the exited sandboxes (sbx.StatusExited, as ps shows
// them: stopped, or running but with their main command ended for good,
// as docker prunes every container ps shows exited), then with o.All
// every image that no remaining sandbox was made from, then the layers no
// image uses. It goes on after a failure and returns what it removed with
// the errors.
func (h *Host) Prune(ctx context.Context, o sbx.PruneOptions) (*sbx.PruneReport, error) {
	rep := &sbx.PruneReport{Sandboxes: []string{}, Images: []string{}}
	var errs []error
	exited, err := h.List(ctx, sbx.Filter{Status: sbx.StatusExited})
	if err != nil {
		return nil, err
	}
	for _, sb := range exited {
		// One whose main command ended still runs its PID 1: forced. The
		// end of a main command is final (no restart clears it).
		if err := h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: sb.Status != sbx.StatusStopped}); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Sandboxes = append(rep.Sandboxes, sb.ID)
	}
	if o.All {
		rest, err := h.List(ctx, sbx.Filter{})
		if err != nil {
			return nil, err
		}
		used := map[string]bool{}
		for _, sb := range rest {
			if sb.Image != nil {
				used[sb.Image.Digest] = true
			}
		}
		images, err := h.ListImages(ctx)
		if err != nil {
			return nil, err
		}
		for _, img := range images {
			if used[img.Digest] {
				continue
			}
			if err := h.RemoveImage(ctx, img.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			rep.Images = append(rep.Images, img.Name)
		}
	}
	gc, err := h.GCImages(ctx)
	if err != nil {
		errs = append(errs, err)
	} else {
		rep.Layers = *gc
	}
	return rep, errors.Join(errs...)
}
