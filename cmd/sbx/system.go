package main

import (
	"context"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/render"
	"github.com/spf13/cobra"
)

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
