// Package volumecmd is sbx's volume command (create, ls, inspect, rm,
// prune; docs/lifecycle.md), over the contract's sbx.Volumes.
package volumecmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
)

// WithBackend runs fn with the CLI's backend (local or remote) and maps
// its error to sbx's exit codes.
type WithBackend func(fn func(ctx context.Context, backend any) error) error

type app struct{ with WithBackend }

// withVolumes calls fn with the backend as sbx.Volumes.
func (a app) withVolumes(fn func(context.Context, sbx.Volumes) error) error {
	return a.with(func(ctx context.Context, b any) error {
		v, ok := b.(sbx.Volumes)
		if !ok {
			return fmt.Errorf("%w: this backend has no named volumes", sbx.ErrUnsupported)
		}
		return fn(ctx, v)
	})
}

// Command returns sbx volume and its subcommands.
func Command(with WithBackend) *cobra.Command {
	a := app{with}
	vol := &cobra.Command{Use: "volume", Args: cobra.NoArgs,
		Short: "Manage named volumes: directories kept across sandboxes (-v NAME:/path) until removed"}
	var labels []string
	create := &cobra.Command{Use: "create [--label K=V] NAME", Args: cobra.ExactArgs(1),
		Short: "Make a named volume (a create with -v NAME:/path makes it too); prints its name",
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := dockerargs.ParseLabels(labels)
			if err != nil {
				return err
			}
			return a.withVolumes(func(ctx context.Context, v sbx.Volumes) error {
				info, err := v.CreateVolume(ctx, sbx.VolumeSpec{Name: args[0], Labels: l})
				if err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), info.Name)
				}
				return err
			})
		}}
	create.Flags().StringArrayVarP(&labels, "label", "l", nil, "set a label: KEY=VALUE")
	var quiet bool
	var format string
	ls := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List named volumes and the sandboxes that have them", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withVolumes(func(ctx context.Context, v sbx.Volumes) error {
				list, err := v.ListVolumes(ctx)
				if err != nil {
					return err
				}
				return render.Volumes(cmd.OutOrStdout(), list, quiet, format)
			})
		}}
	ls.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only names")
	ls.Flags().StringVar(&format, "format", "table", "output format: table or json")
	inspect := &cobra.Command{Use: "inspect NAME...", Short: "Print volumes as JSON", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withVolumes(func(ctx context.Context, v sbx.Volumes) error {
				var out []*sbx.VolumeInfo
				for _, name := range args {
					info, err := v.InspectVolume(ctx, name)
					if err != nil {
						return err
					}
					out = append(out, info)
				}
				return render.JSON(cmd.OutOrStdout(), out)
			})
		}}
	rm := &cobra.Command{Use: "rm NAME...", Aliases: []string{"remove"}, Short: "Remove volumes and their files (refused while a sandbox has one)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withVolumes(func(ctx context.Context, v sbx.Volumes) error {
				var errs []error
				for _, name := range args {
					if err := v.RemoveVolume(ctx, name); err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), name)
				}
				return errors.Join(errs...)
			})
		}}
	prune := &cobra.Command{Use: "prune", Short: "Remove every volume no sandbox has", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withVolumes(func(ctx context.Context, v sbx.Volumes) error {
				rep, err := v.PruneVolumes(ctx)
				if rep != nil {
					fmt.Fprintln(cmd.OutOrStdout(), "Deleted Volumes:")
					for _, name := range rep.Removed {
						fmt.Fprintln(cmd.OutOrStdout(), name)
					}
				}
				return err
			})
		}}
	vol.AddCommand(create, ls, inspect, rm, prune)
	return vol
}
