package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/internal/copyout"
	"github.com/sbxrun/sbx/render"
)

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
