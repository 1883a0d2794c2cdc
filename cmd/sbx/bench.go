package main

import (
	"context"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/bench/runner"
)

func benchCmd(a *app) *cobra.Command {
	o := &runner.Request{}
	cmd := &cobra.Command{
		Use:   "bench [flags] [--image REF | --rootfs DIR] [SCENARIO...]",
		Short: "Measure sandbox start-up latency against other runtimes",
		Long: `Measure sbx's start-up latency and, with --compare, the runtimes users would
pick instead, on the same root filesystem with equivalent isolation.

Scenarios (all by default): ` + strings.Join(bench.ScenarioNames, ", ") + `.
` + runner.ScenarioList() + `
Each scenario runs warm-up rounds, then interleaved measured rounds, and prints
min, p50, p90, p99 and max with the ratio of sbx to each runtime, and where
sbx's time goes. A runtime that is missing or fails is reported with its error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.host != "" {
				return exitErr("sbx bench acts on this host only and does not take --host (or SBX_HOST)")
			}
			o.Scenarios, o.Root, o.RunRoot = args, a.root, a.runRoot
			// A closed output (`sbx bench ... | head`) stops the bench as an
			// interrupt does, so that it removes what it made instead of
			// being killed by SIGPIPE with its sandboxes running.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
			defer stop()
			if err := runner.Run(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				return exitErr("%v", err)
			}
			return nil
		},
	}
	o.Register(cmd.Flags())
	return cmd
}
