package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

func pullCmd(a *app) *cobra.Command {
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry into the image cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fetchImage(a, cmd, &f, "", func(ctx context.Context, b backend, progress func(sbx.PullProgress)) (*sbx.Image, error) {
				return b.PullImage(ctx, args[0], progress)
			})
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

// importImage imports o with the image flags f (fetchImage).
func importImage(a *app, cmd *cobra.Command, f *imageFlags, o sbx.ImportOptions, prefix string) error {
	return fetchImage(a, cmd, f, prefix, func(ctx context.Context, b backend, progress func(sbx.PullProgress)) (*sbx.Image, error) {
		o.Progress = progress
		return b.ImportImage(ctx, o)
	})
}

// fetchImage pulls or imports an image with the image flags f, showing
// progress, and prints its name and digest after prefix.
func fetchImage(a *app, cmd *cobra.Command, f *imageFlags, prefix string, fetch func(context.Context, backend, func(sbx.PullProgress)) (*sbx.Image, error)) error {
	b, err := f.open(a, cmd)
	if err != nil {
		return err
	}
	ctx, stop := console.SignalContext()
	defer stop()
	prog := render.NewProgress(cmd.ErrOrStderr(), f.quiet)
	img, err := fetch(ctx, b, prog.Update)
	prog.Finish()
	if err != nil {
		return err
	}
	for _, one := range append([]sbx.Image{*img}, img.Loaded[min(1, len(img.Loaded)):]...) {
		fmt.Fprintf(cmd.OutOrStdout(), "%s%s %s\n", prefix, sbx.FamiliarName(one.Name), one.Digest)
	}
	return nil
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
			return render.Images(cmd.OutOrStdout(), render.Summaries(imgs), format, quiet)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only digests")
	return cmd
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
			return render.JSON(cmd.OutOrStdout(), img)
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
				name, err := dockerargs.RemoveImage(cmd.Context(), b, ref)
				if err != nil {
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
			render.ImageGCReport(cmd.OutOrStdout(), rep)
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

func tagCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "tag SOURCE TARGET",
		Short: "Give a cached image a further name (NAME[:TAG]); the layers are shared",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				_, err := b.TagImage(ctx, args[0], args[1])
				return err
			})
		},
	}
}

func saveCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "save [-o FILE] IMAGE...",
		Short: "Write cached images as one OCI archive (to stdout, or -o FILE)",
		Long: `Write the images as one OCI archive: an OCI image layout in a tar, each image
named by its reference, as docker save --format oci writes it. sbx load, sbx
import, skopeo and docker load read it. The layers are packed again from the
unpacked cache: their contents are the image's, their digests differ from the
registry's. With -o the file appears only once the archive is complete.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeOut(a, cmd, output, "an archive", func(ctx context.Context, b backend, w io.Writer) error {
				return b.SaveImage(ctx, args, w)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func loadCmd(a *app) *cobra.Command {
	var input string
	var f imageFlags
	cmd := &cobra.Command{
		Use:   "load [-i FILE] [NAME]",
		Short: "Load an image from an archive (stdin, or -i FILE): OCI, docker save or rootfs tar",
		Long: `Load an image into the image cache from an archive read from stdin or -i FILE:
an OCI archive (sbx save, docker save --format oci, skopeo), a docker save
tar, or a root filesystem tarball. The same as sbx import. NAME picks one of
several images of an archive, and names a root filesystem.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := sbx.ImportOptions{Path: input}
			if len(args) == 1 {
				o.Name = args[0]
			}
			if input == "" {
				in := cmd.InOrStdin()
				if console.IsTerminal(in) {
					return exitErr("no archive on stdin: give -i FILE or redirect stdin (sbx load < image.tar)")
				}
				o.Archive = in
			} else if abs, err := filepath.Abs(input); err == nil {
				o.Path = abs
			}
			return importImage(a, cmd, &f, o, "Loaded image: ")
		},
	}
	cmd.Flags().StringVarP(&input, "input", "i", "", "read from this file instead of stdin")
	f.register(cmd)
	return cmd
}

func historyCmd(a *app) *cobra.Command {
	var format string
	var noTrunc, quiet bool
	cmd := &cobra.Command{
		Use:   "history [--no-trunc] [--format table|json] IMAGE",
		Short: "Show how an image was built, newest step first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := render.CheckFormat(format, "table", "json"); err != nil {
				return exitErr("%v", err)
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				steps, err := b.ImageHistory(ctx, args[0])
				if err != nil {
					return err
				}
				return render.History(cmd.OutOrStdout(), steps, render.HistoryOptions{Format: format, NoTrunc: noTrunc, Quiet: quiet})
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "do not shorten commands and layer digests")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the layers' diffIDs")
	return cmd
}
