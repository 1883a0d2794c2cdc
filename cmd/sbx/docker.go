package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/internal/copyout"
	"github.com/sbxrun/sbx/render"
)

// withBackend runs fn with the backend and a context that SIGINT and
// SIGTERM cancel, mapping its error to sbx's exit codes.
func (a *app) withBackend(fn func(context.Context, backend) error) error {
	ctx, b, cancel, err := a.backendCtx()
	if err != nil {
		return sbxError(err)
	}
	defer cancel()
	return sbxError(fn(ctx, b))
}

// The commands a docker user reaches for that map one to one onto the
// contract: tag, save, load, history, diff, rename.

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

func diffCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "diff [--format text|json] SANDBOX",
		Short: "List what a sandbox changed in its root over its image: A added, C changed, D deleted",
		Long: `List the paths of the sandbox's writable layer, sorted, as docker diff does:
A added, C changed (the image has the path), D deleted. The files sbx writes
into every sandbox (/etc/hosts, /etc/hostname, /etc/resolv.conf) are left
out. Volumes and tmpfs mounts are not part of the root and never listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := render.CheckFormat(format, "text", "json"); err != nil {
				return exitErr("%v", err)
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				changes, err := b.Diff(ctx, args[0])
				if err != nil {
					return err
				}
				return render.Changes(cmd.OutOrStdout(), changes, format)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func renameCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rename SANDBOX NEW_NAME",
		Short: "Give a sandbox a new unique name",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				_, err := b.Rename(ctx, args[0], args[1])
				return err
			})
		},
	}
}

func systemCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "system",
		Short: "What sbx holds on this host (df) and removing what is unused (prune)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	var format string
	df := &cobra.Command{
		Use:   "df [--format table|json]",
		Short: "Show what images, layers and sandboxes hold",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				du, err := b.DiskUsage(ctx)
				if err != nil {
					return err
				}
				if format == "json" {
					return render.JSON(cmd.OutOrStdout(), du)
				}
				return render.DiskUsage(cmd.OutOrStdout(), du)
			})
		},
	}
	df.Flags().StringVar(&format, "format", "table", "output format: table or json")
	var o sbx.PruneOptions
	var force bool
	prune := &cobra.Command{
		Use:   "prune [-a] [-f]",
		Short: "Remove stopped sandboxes, unused layers, and with -a every image no sandbox uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				what := "all stopped sandboxes and the image layers no image uses"
				if o.All {
					what = "all stopped sandboxes, every image no sandbox uses, and their layers"
				}
				if !console.IsTerminal(cmd.InOrStdin()) {
					return exitErr("sbx system prune removes %s: confirm with -f", what)
				}
				if !console.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), "This removes "+what+". Continue?") {
					return exitWith(1)
				}
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				rep, err := b.Prune(ctx, o)
				if rep != nil {
					render.PruneReport(cmd.OutOrStdout(), rep)
				}
				return err
			})
		},
	}
	prune.Flags().BoolVarP(&o.All, "all", "a", false, "also remove every image no sandbox uses")
	prune.Flags().BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	cmd.AddCommand(df, prune)
	return cmd
}

func exportCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export [-o FILE] SANDBOX",
		Short: "Write a sandbox's root file system as a tar (to stdout, or -o FILE)",
		Long: `Write the sandbox's root file system, its image with what it changed, as one
tar (docker export): to stdout (not a terminal) or to FILE, which appears only
once the tar is complete. A running sandbox is paused while it is read.
Volumes and tmpfs mounts are not part of the root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeOut(a, cmd, output, "a tar", func(ctx context.Context, b backend, w io.Writer) error {
				return b.Export(ctx, args[0], w)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

// writeOut calls write with stdout (refused when it is a terminal: what
// names the stream), or with -o FILE, which appears only once write
// succeeded (copyout.WriteFile).
func writeOut(a *app, cmd *cobra.Command, output, what string, write func(context.Context, backend, io.Writer) error) error {
	out := cmd.OutOrStdout()
	if output == "" && console.IsTerminal(out) {
		return exitErr("refusing to write %s to a terminal: give -o FILE or redirect stdout", what)
	}
	return a.withBackend(func(ctx context.Context, b backend) error {
		if output == "" {
			return write(ctx, b, out)
		}
		return copyout.WriteFile(output, func(w io.Writer) error { return write(ctx, b, w) })
	})
}
