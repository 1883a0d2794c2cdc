package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sbxrun/sbx"
)

// ImageSummary is one image as sbx images --format json shows it.
type ImageSummary struct {
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	SizeBytes int64     `json:"size_bytes"`
	Created   time.Time `json:"created"`
	Platform  string    `json:"platform"`
	Layers    int       `json:"layers"`
}

// Summaries are the summaries of imgs, in their order.
func Summaries(imgs []sbx.Image) []ImageSummary {
	list := make([]ImageSummary, 0, len(imgs))
	for _, img := range imgs {
		list = append(list, ImageSummary{img.Name, img.Digest, img.SizeBytes, img.Created, img.Platform, len(img.DiffIDs)})
	}
	return list
}

// Images writes images as sbx images shows them: a table (format "table"
// or ""), short digests only (quiet) or JSON.
func Images(w io.Writer, list []ImageSummary, format string, quiet bool) error {
	switch {
	case format == "json":
		return JSON(w, list)
	case format != "table" && format != "":
		return fmt.Errorf("invalid --format %q: use table or json", format)
	case quiet:
		for _, img := range list {
			fmt.Fprintln(w, ShortID(img.Digest))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tCREATED")
	for _, img := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sbx.FamiliarName(img.Name), ShortID(img.Digest), Bytes(img.SizeBytes), Age(img.Created))
	}
	return tw.Flush()
}

// HistoryOptions say how History shows an image's steps.
type HistoryOptions struct {
	Format  string // "table" or "json"
	NoTrunc bool   // full commands and layer digests
	Quiet   bool   // only the layers' diffIDs
}

// History writes an image's build steps as sbx history does.
func History(w io.Writer, steps []sbx.ImageHistoryEntry, o HistoryOptions) error {
	switch {
	case o.Format == "json":
		if steps == nil {
			steps = []sbx.ImageHistoryEntry{}
		}
		return JSON(w, steps)
	case o.Quiet:
		for _, s := range steps {
			if s.DiffID != "" {
				fmt.Fprintln(w, s.DiffID)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "LAYER\tCREATED\tCREATED BY\tSIZE\tCOMMENT")
	for _, s := range steps {
		layer, by := "<missing>", strings.Join(strings.Fields(s.CreatedBy), " ")
		if s.DiffID != "" {
			layer = s.DiffID
			if !o.NoTrunc {
				layer = ShortID(s.DiffID)
			}
		}
		if !o.NoTrunc {
			by = Truncate(by, 45)
		}
		created := "-"
		if !s.Created.IsZero() {
			created = Age(s.Created)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", layer, created, by, Bytes(s.SizeBytes), s.Comment)
	}
	return tw.Flush()
}

// DiskUsage writes sbx system df's table.
func DiskUsage(w io.Writer, du *sbx.DiskUsage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tTOTAL\tACTIVE\tSIZE\tRECLAIMABLE")
	fmt.Fprintf(tw, "Images\t%d\t%d\t%s\t%s\n", du.Images, du.ImagesInUse, Bytes(du.LayersBytes), Bytes(du.ReclaimableBytes))
	fmt.Fprintf(tw, "Sandboxes (writable layers, in memory)\t%d\t%d\t%s\t%s\n", du.Sandboxes, du.SandboxesRunning, Bytes(du.WritableBytes), Bytes(du.StoppedWritableBytes))
	cache := du.BuildCacheBytes + du.BuildCacheMountBytes
	fmt.Fprintf(tw, "Build cache (steps, cache mounts)\t%d\t0\t%s\t%s\n", du.BuildCacheImages, Bytes(cache), Bytes(cache))
	return tw.Flush()
}

// BuildPruneReport writes what sbx build prune removed.
func BuildPruneReport(w io.Writer, rep *sbx.BuildPruneReport) {
	fmt.Fprintf(w, "removed %d build steps and %d cache mounts (%s), %d layers, freed %s\n", rep.Images, rep.CacheMounts,
		Bytes(rep.CacheMountBytes), len(rep.Layers.RemovedLayers), Bytes(rep.Layers.FreedBytes+rep.CacheMountBytes))
}

// PruneReport writes what sbx system prune removed.
func PruneReport(w io.Writer, rep *sbx.PruneReport) {
	for _, id := range rep.Sandboxes {
		fmt.Fprintln(w, "removed sandbox", id)
	}
	for _, name := range rep.Images {
		fmt.Fprintln(w, "removed image", sbx.FamiliarName(name))
	}
	fmt.Fprintf(w, "removed %d layers, freed %s\n", len(rep.Layers.RemovedLayers), Bytes(rep.Layers.FreedBytes))
}

// ImageGCReport writes what sbx image gc removed and kept.
func ImageGCReport(w io.Writer, rep *sbx.ImageGCReport) {
	fmt.Fprintf(w, "removed %d layers, freed %s\n", len(rep.RemovedLayers), Bytes(rep.FreedBytes))
	if n := len(rep.KeptInUse); n > 0 {
		fmt.Fprintf(w, "kept %d unused layers that a mount still uses\n", n)
	}
}
