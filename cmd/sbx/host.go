package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/internal/version"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

func infoCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show what this host offers and what sbx will use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				info, err := b.Info(ctx)
				if err != nil {
					return err
				}
				if format == "json" {
					return render.JSON(cmd.OutOrStdout(), info)
				}
				render.Info(cmd.OutOrStdout(), info)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func gcCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove what crashed sandboxes left behind (mounts, cgroups, directories)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				rep, err := b.GC(ctx)
				if rep != nil {
					render.GCReport(cmd.OutOrStdout(), rep)
				}
				return err
			})
		},
	}
}

func networkCmd(a *app) *cobra.Command {
	network := &cobra.Command{
		Use:   "network",
		Short: "Manage the bridge network (pool of prepared namespaces)",
		Args:  cobra.NoArgs,
	}
	pool := &cobra.Command{
		Use:   "pool",
		Short: "Fill, drain or count the pool of prepared bridged namespaces",
		Long: `The pool holds network namespaces prepared ahead (veth on the bridge,
address, anti-spoofing guard), so a bridged sandbox or run only installs its
own rules. Any sbx process sharing --root uses it; sbx serve --network-pool N
keeps it filled on its own.`,
		Args: cobra.NoArgs,
	}
	withHost := func(fn func(*cobra.Command, []string, *sandbox.Host) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			h, err := a.localHost(cmd, sandbox.HostConfig{})
			if err == nil {
				err = fn(cmd, args, h)
			}
			if err != nil {
				return exitErr("%v", err)
			}
			return nil
		}
	}
	pool.AddCommand(&cobra.Command{
		Use:   "fill N",
		Short: "Prepare namespaces until N wait in the pool",
		Args:  cobra.ExactArgs(1),
		RunE: withHost(func(cmd *cobra.Command, args []string, h *sandbox.Host) error {
			want, err := strconv.Atoi(args[0])
			if err != nil || want < 0 {
				return fmt.Errorf("invalid pool size %q: want a count", args[0])
			}
			added, have, err := h.PrepareNetworks(cmd.Context(), want)
			fmt.Fprintf(cmd.OutOrStdout(), "added %d, %d in the pool\n", added, have)
			return err
		}),
	}, &cobra.Command{
		Use:   "drain",
		Short: "Remove every prepared namespace from the pool",
		Args:  cobra.NoArgs,
		RunE: withHost(func(cmd *cobra.Command, args []string, h *sandbox.Host) error {
			return h.DiscardPreparedNetworks(cmd.Context())
		}),
	}, &cobra.Command{
		Use:   "ls",
		Short: "Print how many prepared namespaces wait in the pool",
		Args:  cobra.NoArgs,
		RunE: withHost(func(cmd *cobra.Command, args []string, h *sandbox.Host) error {
			n, err := h.PreparedNetworks()
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return err
		}),
	})
	network.AddCommand(pool, &cobra.Command{
		Use:   "reset",
		Short: "Drain the pool and delete the bridge and sbx's nftables tables (no bridged sandbox may be left)",
		Args:  cobra.NoArgs,
		RunE: withHost(func(cmd *cobra.Command, args []string, h *sandbox.Host) error {
			return h.ResetNetwork(cmd.Context())
		}),
	})
	return network
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the sbx version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "sbx %s (commit %s, %s, %s/%s)\n",
				version.Version, version.Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

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
		Short: "Remove exited sandboxes, unused layers, and with -a every image no sandbox uses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				what := "all exited sandboxes and the image layers no image uses"
				if o.All {
					what = "all exited sandboxes, every image no sandbox uses, and their layers"
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
