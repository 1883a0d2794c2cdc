package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

// poolCmd is sbx pool: warm pools of started sandboxes that creates claim
// (docs/pools.md).
func poolCmd(a *app) *cobra.Command {
	pool := &cobra.Command{Use: "pool", Args: cobra.NoArgs,
		Short: "Manage warm pools: idle sandboxes started ahead that a matching create claims (docs/pools.md)"}
	o := &createOptions{}
	var size int
	var start, ready string
	var readyTimeout time.Duration
	create := &cobra.Command{
		Use:   "create NAME --size N [flags] (IMAGE | --rootfs DIR)",
		Short: "Define a warm pool of N sandboxes started with these options",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.images.hostConfig(a, cmd)
			if err != nil {
				return err
			}
			opts, err := o.Options(args[1:], a.host == "")
			if err != nil {
				return exitErr("%v", err)
			}
			spec, err := sandbox.TemplateSpec(sbx.PoolSpec{Name: args[0], Size: size, Options: opts}, start, ready, readyTimeout)
			if err != nil {
				return exitErr("%v", err)
			}
			return a.withPools(cfg, func(ctx context.Context, p sbx.Pools) error {
				_, err := p.CreatePool(ctx, spec)
				return err
			})
		},
	}
	o.RegisterStart(create.Flags())
	o.images.register(create)
	create.Flags().IntVar(&size, "size", 1, "how many idle members the pool keeps")
	create.Flags().StringVar(&start, "start", "", "a template's start command (sh -c), booted in each member before its claim")
	create.Flags().StringVar(&ready, "ready", "", "a template's ready command (sh -c): a member is claimable once it exits 0")
	create.Flags().DurationVar(&readyTimeout, "ready-timeout", 0, "how long the ready command may take to pass (default 10m)")
	ls := &cobra.Command{Use: "ls", Short: "List warm pools with their ready members", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withPools(sandbox.HostConfig{}, func(ctx context.Context, p sbx.Pools) error {
				list, err := p.ListPools(ctx)
				if err != nil {
					return err
				}
				return render.Pools(cmd.OutOrStdout(), list)
			})
		}}
	pool.AddCommand(create, ls,
		poolOpCmd(a, "fill", "Start members until the pools are full (all pools without NAME)", (sbx.Pools).FillPool),
		poolOpCmd(a, "drain", "Remove the idle members of pools (a server refills them)", (sbx.Pools).DrainPool),
		poolOpCmd(a, "rm", "Remove pools and their idle members", (sbx.Pools).RemovePool))
	return pool
}

// withPools calls fn with the backend as sbx.Pools.
func (a *app) withPools(cfg sandbox.HostConfig, fn func(context.Context, sbx.Pools) error) error {
	b, err := a.open(cfg)
	if err != nil {
		return sbxError(err)
	}
	p, ok := b.(sbx.Pools)
	if !ok {
		return exitErr("this backend has no warm pools")
	}
	ctx, cancel := console.SignalContext()
	defer cancel()
	return sbxError(fn(ctx, p))
}

// poolOpCmd runs op on each named pool (fill: every pool without names)
// and prints what it started and removed.
func poolOpCmd(a *app, name, short string, op func(sbx.Pools, context.Context, string) (*sbx.PoolReport, error)) *cobra.Command {
	return &cobra.Command{Use: name + " NAME...", Short: short,
		RunE: func(cmd *cobra.Command, names []string) error {
			return a.withPools(sandbox.HostConfig{}, func(ctx context.Context, p sbx.Pools) error {
				if len(names) == 0 && name != "fill" {
					return exitErr("sbx pool %s: name a pool", name)
				}
				return sbx.EachPool(ctx, p, names, op, func(n string, rep *sbx.PoolReport) {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: started %d, removed %d\n", n, len(rep.Started), len(rep.Removed))
				})
			})
		}}
}
