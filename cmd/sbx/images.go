package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/sandbox"
)

// imageFlags are the options of commands that pull or import.
type imageFlags struct {
	platform string
	insecure []string
	quiet    bool
}

func (f *imageFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.platform, "platform", "", "platform to pick from multi-arch images (os/arch[/variant]); default the host's")
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry host[:port] to reach over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print no progress")
}

// openImageStore opens <--root>/images with the flags' options.
func openImageStore(f *imageFlags) (*imagecache.Store, error) {
	opts := imagecache.Options{}
	if f != nil {
		opts.Platform = f.platform
		opts.InsecureRegistries = f.insecure
	}
	return imagecache.Open(filepath.Join(global.root, "images"), opts)
}

func newPullCmd() *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry into the image cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				if err := rejectRemoteImageFlags(cmd, "platform", "insecure-registry"); err != nil {
					return err
				}
				return remotePull(cmd, args[0], f.quiet)
			}
			s, err := openImageStore(&f)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			prog := newImageProgress(cmd.ErrOrStderr(), f.quiet)
			img, err := s.Pull(ctx, args[0], prog.update)
			prog.finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", imagecache.FamiliarName(img.Name), img.Digest)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newImportCmd() *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "import PATH [NAME]",
		Short: "Import an OCI layout or archive, a docker save tar, or a root filesystem tarball",
		Long: `Import an image into the image cache from PATH: an OCI image layout directory,
an OCI archive (a tar of a layout), a docker save tar, or a plain root
filesystem tarball (tar, tar.gz or tar.zst). NAME is needed when the archive
does not name its image, and always for a root filesystem.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			if remoteHost != "" {
				return remoteImport(cmd, args[0], name)
			}
			s, err := openImageStore(&f)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			prog := newImageProgress(cmd.ErrOrStderr(), f.quiet)
			img, err := s.Import(ctx, args[0], name, prog.update)
			prog.finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", imagecache.FamiliarName(img.Name), img.Digest)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// imageSummary is one line of sbx images --format json.
type imageSummary struct {
	Name     string    `json:"name"`
	Digest   string    `json:"digest"`
	Size     int64     `json:"size"`
	Created  time.Time `json:"created"`
	Platform string    `json:"platform"`
	Layers   int       `json:"layers"`
}

// printImages writes images as `sbx images` shows them: a table, IDs only
// (quiet) or JSON.
func printImages(out io.Writer, list []imageSummary, format string, quiet bool) error {
	switch {
	case format == "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	case format != "table" && format != "":
		return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid --format %q: use table or json", format)}
	case quiet:
		for _, img := range list {
			fmt.Fprintln(out, shortID(img.Digest))
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tCREATED")
	for _, img := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", imagecache.FamiliarName(img.Name), shortID(img.Digest), humanBytes(img.Size), humanAge(img.Created))
	}
	return tw.Flush()
}

func newImagesCmd(use string) *cobra.Command {
	var format string
	var quiet bool
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the cached images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				return remoteImages(cmd, format, quiet)
			}
			s, err := openImageStore(nil)
			if err != nil {
				return err
			}
			imgs, err := s.List()
			if err != nil {
				return err
			}
			list := make([]imageSummary, 0, len(imgs))
			for _, img := range imgs {
				list = append(list, imageSummary{img.Name, img.Digest, img.Size, img.Created, img.Platform, len(img.LayerDirs)})
			}
			return printImages(cmd.OutOrStdout(), list, format, quiet)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only digests")
	return cmd
}

func newImageInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect REF",
		Short: "Show a cached image as JSON: config, layers, digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				return remoteImageInspect(cmd, args[0])
			}
			s, err := openImageStore(nil)
			if err != nil {
				return err
			}
			img, err := s.Resolve(args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(img)
		},
	}
}

func newRmiCmd(use string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " REF...",
		Short: "Remove images from the cache (run sbx image gc to free their layers)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				return remoteRmi(cmd, args)
			}
			s, err := openImageStore(nil)
			if err != nil {
				return err
			}
			var failed error
			for _, ref := range args {
				names, err := s.Remove(cmd.Context(), ref)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", err)
					failed = exitWith(exitSbxFailed)
					continue
				}
				for _, n := range names {
					fmt.Fprintln(cmd.OutOrStdout(), "Untagged:", imagecache.FamiliarName(n))
				}
			}
			return failed
		},
	}
}

func newImageGCCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove the layers no cached image uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				return remoteImageGC(cmd)
			}
			s, err := openImageStore(nil)
			if err != nil {
				return err
			}
			// Sandboxes on record keep their layers, stopped ones too.
			m, err := sandbox.New(sandbox.Config{Root: global.root, RunRoot: global.runRoot})
			if err != nil {
				return err
			}
			res, err := s.GC(cmd.Context(), m.ImageLayers)
			if err != nil {
				return err
			}
			printImageGC(cmd, len(res.RemovedLayers), res.FreedBytes, len(res.KeptInUse))
			return nil
		},
	}
}

func init() {
	imageCmd := &cobra.Command{
		Use:   "image",
		Short: "Manage the image cache",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	imageCmd.AddCommand(newImagesCmd("ls"), newImageInspectCmd(), newRmiCmd("rm"), newImageGCCmd(), newPullCmd(), newImportCmd())
	rootCmd.AddCommand(imageCmd, newPullCmd(), newImportCmd(), newImagesCmd("images"), newRmiCmd("rmi"))
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
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// imageProgress renders pull and import progress: a bar per layer on a
// terminal, a line per finished layer otherwise, nothing with --quiet.
type imageProgress struct {
	w      io.Writer
	quiet  bool
	tty    bool
	layers []imagecache.Progress
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

func (p *imageProgress) update(u imagecache.Progress) {
	if p.quiet {
		return
	}
	for len(p.layers) < u.Count {
		p.layers = append(p.layers, imagecache.Progress{})
		p.start = append(p.start, time.Time{})
	}
	if u.Index >= len(p.layers) {
		return
	}
	prev := p.layers[u.Index].Phase
	p.layers[u.Index] = u
	if u.Phase == imagecache.PhaseDownloading && p.start[u.Index].IsZero() {
		p.start[u.Index] = time.Now()
	}
	if !p.tty {
		if u.Phase != prev && (u.Phase == imagecache.PhaseDone || u.Phase == imagecache.PhaseCached) {
			fmt.Fprintf(p.w, "layer %d/%d %s: %s %s\n", u.Index+1, u.Count, shortID(u.Layer), u.Phase, humanBytes(u.Total))
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

func (p *imageProgress) bar(i int, l imagecache.Progress) string {
	switch l.Phase {
	case imagecache.PhaseDownloading, imagecache.PhaseUnpacking:
	case imagecache.PhaseDone, imagecache.PhaseCached:
		return humanBytes(l.Total)
	default:
		return ""
	}
	const width = 30
	fill := 0
	if l.Total > 0 {
		fill = int(min(width, l.Current*width/l.Total))
	}
	// The rate is the download's: while unpacking the bytes no longer
	// flow, and a rate over the whole time would only decay.
	rate := ""
	if el := time.Since(p.start[i]).Seconds(); el > 0 && l.Phase == imagecache.PhaseDownloading {
		rate = humanBytes(int64(float64(l.Current)/el)) + "/s"
	}
	return fmt.Sprintf("[%s%s] %s/%s %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), humanBytes(l.Current), humanBytes(l.Total), rate)
}

func (p *imageProgress) finish() {
	if p.tty && !p.quiet && len(p.layers) > 0 {
		p.redraw()
	}
}
