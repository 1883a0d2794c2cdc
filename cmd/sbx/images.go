package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

func pullCmd(a *app) *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry into the image cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := f.open(a, cmd)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			prog := newImageProgress(cmd.ErrOrStderr(), f.quiet)
			img, err := b.PullImage(ctx, args[0], prog.update)
			prog.finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", sbx.FamiliarName(img.Name), img.Digest)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// open opens the backend with the image flags' options.
func (f *imageFlags) open(a *app, cmd *cobra.Command) (backend, error) {
	cfg, err := f.hostConfig(a, cmd)
	if err != nil {
		return nil, err
	}
	return a.open(cfg)
}

func importCmd(a *app) *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "import PATH [NAME]",
		Short: "Import an OCI layout or archive, a docker save tar, or a root filesystem tarball",
		Long: `Import an image into the image cache from PATH: an OCI image layout directory,
an OCI archive (a tar of a layout), a docker save tar, or a plain root
filesystem tarball (tar, tar.gz or tar.zst). NAME is needed when the archive
does not name its image, and always for a root filesystem. With --host the
archive is uploaded to the server (a layout directory tarred on the fly).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := sbx.ImportOptions{Path: args[0]}
			if len(args) == 2 {
				o.Name = args[1]
			}
			return importImage(a, cmd, &f, o, "")
		},
	}
	f.register(cmd)
	return cmd
}

// importImage imports o with the image flags f, showing progress, and
// prints the image's name and digest after prefix.
func importImage(a *app, cmd *cobra.Command, f *imageFlags, o sbx.ImportOptions, prefix string) error {
	b, err := f.open(a, cmd)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	prog := newImageProgress(cmd.ErrOrStderr(), f.quiet)
	o.Progress = prog.update
	img, err := b.ImportImage(ctx, o)
	prog.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s%s %s\n", prefix, sbx.FamiliarName(img.Name), img.Digest)
	return nil
}

// imageSummary is one line of sbx images --format json.
type imageSummary struct {
	Name      string    `json:"name"`
	Digest    string    `json:"digest"`
	SizeBytes int64     `json:"size_bytes"`
	Created   time.Time `json:"created"`
	Platform  string    `json:"platform"`
	Layers    int       `json:"layers"`
}

func imagesCmd(a *app, use string) *cobra.Command {
	var format string
	var quiet bool
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the cached images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			imgs, err := b.ListImages(cmd.Context())
			if err != nil {
				return err
			}
			list := make([]imageSummary, 0, len(imgs))
			for _, img := range imgs {
				list = append(list, imageSummary{img.Name, img.Digest, img.SizeBytes, img.Created, img.Platform, len(img.DiffIDs)})
			}
			return printImages(cmd.OutOrStdout(), list, format, quiet)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only digests")
	return cmd
}

// printImages writes images as sbx images shows them: a table, IDs only
// (quiet) or JSON.
func printImages(out io.Writer, list []imageSummary, format string, quiet bool) error {
	switch {
	case format == "json":
		return writeJSON(out, list)
	case format != "table" && format != "":
		return exitErr("invalid --format %q: use table or json", format)
	case quiet:
		for _, img := range list {
			fmt.Fprintln(out, shortID(img.Digest))
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tCREATED")
	for _, img := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sbx.FamiliarName(img.Name), shortID(img.Digest), humanBytes(img.SizeBytes), humanAge(img.Created))
	}
	return tw.Flush()
}

func imageInspectCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect REF",
		Short: "Show a cached image as JSON: config, layers, digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			img, err := b.InspectImage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), img)
		},
	}
}

func rmiCmd(a *app, use string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " REF...",
		Short: "Remove images from the cache (run sbx image gc to free their layers)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			var failed error
			for _, ref := range args {
				name := ref
				if img, err := b.InspectImage(cmd.Context(), ref); err == nil {
					name = sbx.FamiliarName(img.Name)
				}
				if err := b.RemoveImage(cmd.Context(), ref); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", err)
					failed = exitWith(sbx.ExitSbxFailed)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), "Untagged:", name)
			}
			return failed
		},
	}
}

func imageGCCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove the layers no cached image uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			rep, err := b.GCImages(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d layers, freed %s\n", len(rep.RemovedLayers), humanBytes(rep.FreedBytes))
			if n := len(rep.KeptInUse); n > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "kept %d unused layers that a mount still uses\n", n)
			}
			return nil
		},
	}
}

func imageCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the image cache",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(imagesCmd(a, "ls"), imageInspectCmd(a), rmiCmd(a, "rm"), imageGCCmd(a), pullCmd(a), importCmd(a),
		tagCmd(a), saveCmd(a), loadCmd(a), historyCmd(a))
	return cmd
}

func shortID(digest string) string {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

func humanAge(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return units.HumanDuration(time.Since(t)) + " ago"
}

// imageProgress renders pull and import progress: a bar per layer on a
// terminal, a line per finished layer otherwise, nothing with --quiet.
type imageProgress struct {
	w      io.Writer
	quiet  bool
	tty    bool
	layers []sbx.PullProgress
	start  []time.Time
	drawn  int
	last   time.Time
}

func newImageProgress(w io.Writer, quiet bool) *imageProgress {
	p := &imageProgress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *imageProgress) update(u sbx.PullProgress) {
	if p.quiet {
		return
	}
	for len(p.layers) < u.Count {
		p.layers = append(p.layers, sbx.PullProgress{})
		p.start = append(p.start, time.Time{})
	}
	if u.Index >= len(p.layers) {
		return
	}
	prev := p.layers[u.Index].Phase
	p.layers[u.Index] = u
	if u.Phase == "downloading" && p.start[u.Index].IsZero() {
		p.start[u.Index] = time.Now()
	}
	if !p.tty {
		if u.Phase != prev && (u.Phase == "done" || u.Phase == "cached") {
			fmt.Fprintf(p.w, "layer %d/%d %s: %s %s\n", u.Index+1, u.Count, shortID(u.Layer), u.Phase, humanBytes(u.TotalBytes))
		}
		return
	}
	if time.Since(p.last) < 100*time.Millisecond && u.Phase == prev {
		return
	}
	p.redraw()
}

func (p *imageProgress) redraw() {
	p.last = time.Now()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	for i, l := range p.layers {
		fmt.Fprintf(&b, "\x1b[2K%s %-11s %s\n", shortID(l.Layer), l.Phase, p.bar(i, l))
	}
	p.drawn = len(p.layers)
	io.WriteString(p.w, b.String())
}

func (p *imageProgress) bar(i int, l sbx.PullProgress) string {
	switch l.Phase {
	case "downloading", "unpacking":
	case "done", "cached":
		return humanBytes(l.TotalBytes)
	default:
		return ""
	}
	const width = 30
	fill := 0
	if l.TotalBytes > 0 {
		fill = int(min(width, l.CurrentBytes*width/l.TotalBytes))
	}
	// The rate is the download's: while unpacking the bytes no longer
	// flow, and a rate over the whole time would only decay.
	rate := ""
	if el := time.Since(p.start[i]).Seconds(); el > 0 && l.Phase == "downloading" {
		rate = humanBytes(int64(float64(l.CurrentBytes)/el)) + "/s"
	}
	return fmt.Sprintf("[%s%s] %s/%s %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), humanBytes(l.CurrentBytes), humanBytes(l.TotalBytes), rate)
}

func (p *imageProgress) finish() {
	if p.tty && !p.quiet && len(p.layers) > 0 {
		p.redraw()
	}
}
