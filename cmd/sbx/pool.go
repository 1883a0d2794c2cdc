package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

// poolCmd is sbx pool: warm pools of started sandboxes that creates claim.
func poolCmd(a *app) *cobra.Command {
	pool := &cobra.Command{
		Use:   "pool",
		Short: "Manage warm pools: sandboxes started ahead that a matching create claims",
		Long: `A warm pool keeps N sandboxes started and idle, their executor answering.
A create (sbx create, or POST /v1/sandboxes) whose options match a pool's
claims one of them instead of starting a sandbox, and
gets its name, labels, --ttl, --env, --workdir, --memory, --cpus, --pids-limit
and --disk applied. Everything else is fixed when a sandbox starts and must match:
the image (by digest) or --rootfs, --network and its flags, --seccomp,
--cap-add/--cap-drop, --user, --hostname, --read-only, --volume and --tmpfs.

Pools live under --root, shared by every sbx process: claims work without a
server. sbx serve refills its pools in the background; without one, run
sbx pool fill. Members count against the host's sandbox and memory limits;
sbx ps shows them with --pooled.`,
		Args: cobra.NoArgs,
	}
	pool.AddCommand(poolCreateCmd(a), poolListCmd(a),
		poolOpCmd(a, "fill", "Start members until each pool is full (all pools without NAME)", (sbx.Pools).FillPool),
		poolOpCmd(a, "drain", "Remove the idle members of pools (a server refills them)", (sbx.Pools).DrainPool),
		poolOpCmd(a, "rm", "Remove pools and their idle members", (sbx.Pools).RemovePool))
	return pool
}

// pools opens the backend as sbx.Pools.
func (a *app) pools(cfg sandbox.HostConfig) (sbx.Pools, error) {
	b, err := a.open(cfg)
	if err != nil {
		return nil, sbxError(err)
	}
	p, ok := b.(sbx.Pools)
	if !ok {
		return nil, exitErr("this backend has no warm pools")
	}
	return p, nil
}

func poolCreateCmd(a *app) *cobra.Command {
	o := &createOptions{}
	var size int
	var fill bool
	cmd := &cobra.Command{
		Use:   "create NAME --size N [flags] (IMAGE | --rootfs DIR)",
		Short: "Define a warm pool of N sandboxes started with these options",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.images.hostConfig(a, cmd)
			if err != nil {
				return err
			}
			opts, err := o.options(args[1:], a.host == "")
			if err != nil {
				return exitErr("%v", err)
			}
			p, err := a.pools(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			if _, err := p.CreatePool(ctx, sbx.PoolSpec{Name: args[0], Size: size, Options: opts}); err != nil {
				return sbxError(err)
			}
			if fill {
				rep, err := p.FillPool(ctx, args[0])
				if rep != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: started %d\n", args[0], len(rep.Started))
				}
				if err != nil {
					return sbxError(err)
				}
			}
			return nil
		},
	}
	o.registerStart(cmd)
	cmd.Flags().IntVar(&size, "size", 1, "how many idle members the pool keeps")
	cmd.Flags().BoolVar(&fill, "fill", false, "start the members now (sbx pool fill)")
	return cmd
}

func poolListCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "ls [--format table|json]",
		Aliases: []string{"list"},
		Short:   "List warm pools with their ready members",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "table" && format != "json" {
				return exitErr("invalid --format %q: use table or json", format)
			}
			p, err := a.pools(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			list, err := p.ListPools(context.Background())
			if err != nil {
				return sbxError(err)
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printPools(cmd.OutOrStdout(), list)
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}

func printPools(w io.Writer, list []*sbx.Pool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIMAGE\tSIZE\tREADY\tSTARTING\tNETWORK\tKEY")
	for _, p := range list {
		img := imageOf(&p.Options)
		network := p.Options.Network
		if network == "" {
			network = sbx.NetworkNone
		}
		key := p.Key
		if len(key) > 12 {
			key = key[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Name, img, p.Size, len(p.Ready), p.Starting, network, key)
	}
	return tw.Flush()
}

// poolOpCmd is a command that runs op on the named pools (every pool
// when fill gets no name) and prints what it started and removed.
func poolOpCmd(a *app, name, short string, op func(sbx.Pools, context.Context, string) (*sbx.PoolReport, error)) *cobra.Command {
	args := cobra.MinimumNArgs(1)
	use := name + " NAME..."
	if name == "fill" {
		args, use = cobra.ArbitraryArgs, name+" [NAME...]"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, names []string) error {
			p, err := a.pools(sandbox.HostConfig{})
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			if len(names) == 0 {
				list, err := p.ListPools(ctx)
				if err != nil {
					return sbxError(err)
				}
				for _, pl := range list {
					names = append(names, pl.Name)
				}
			}
			var failed []string
			for _, n := range names {
				rep, err := op(p, ctx, n)
				if rep != nil {
					var parts []string
					if len(rep.Started) > 0 || name == "fill" {
						parts = append(parts, fmt.Sprintf("started %d", len(rep.Started)))
					}
					if len(rep.Removed) > 0 || name != "fill" {
						parts = append(parts, fmt.Sprintf("removed %d", len(rep.Removed)))
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", n, strings.Join(parts, ", "))
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "sbx pool %s %s: %v\n", name, n, err)
					failed = append(failed, n)
				}
			}
			if len(failed) > 0 {
				return exitErr("sbx pool %s failed for %s", name, strings.Join(failed, ", "))
			}
			return nil
		},
	}
}
