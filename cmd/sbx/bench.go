package main

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

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
` + scenarioHelp() + `
Each scenario runs warm-up rounds, then interleaved measured rounds, and prints
min, p50, p90, p99 and max with the ratio of sbx to each runtime, and where
sbx's time goes. A runtime that is missing or fails is reported with its error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.host != "" {
				return exitErr("sbx bench acts on this host only and does not take --host (or SBX_HOST)")
			}
			o.Scenarios, o.Root, o.RunRoot = args, a.root, a.runRoot
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := runner.Run(ctx, o, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				return exitErr("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Rootfs, "rootfs", "", "unpacked root filesystem every runtime uses (read-only); it needs the programs true and sleep")
	f.StringVar(&o.Image, "image", "", "cached image sbx runs (sbx run IMAGE); the other runtimes use its unpacked layers (default: a busybox root built once under "+bench.DefaultRootDir+" and imported into the bench's own image store)")
	f.StringSliceVar(&o.Compare, "compare", nil, "runtimes to compare with: "+strings.Join(bench.AnchorNames, ","))
	f.IntVar(&o.Samples, "samples", 100, "measured rounds per scenario (p99 needs 100)")
	f.IntVar(&o.Warmup, "warmup", 5, "warm-up rounds per scenario, not counted")
	f.DurationVar(&o.MaxTime, "max-time", 5*time.Minute, "time limit of the measured rounds of one scenario")
	f.StringVar(&o.JSONPath, "json", "", "write the full report, samples included, as JSON to this file")
	f.StringVar(&o.PlotPath, "plot", "", "draw the distributions to this .svg or .png file")
	f.StringVar(&o.Format, "format", "text", "table format: text or markdown")
	f.StringVar(&o.DockerHost, "docker-host", "", "docker daemon socket for the docker runtime (default $DOCKER_HOST or unix:///var/run/docker.sock)")
	f.BoolVar(&o.StartDockerd, "start-dockerd", false, "start a private dockerd for the docker runtime when none answers, and stop it afterwards")
	f.IntVar(&o.Density, "density", 1000, "idle sandboxes the density scenario creates (1 to 1000)")
	f.StringVar(&o.SbxBin, "sbx-bin", "", "statically linked sbx binary to measure (default: this one)")
	return cmd
}

// scenarioHelp lists the scenarios of sbx bench, one line each.
func scenarioHelp() string {
	var b strings.Builder
	for _, name := range bench.ScenarioNames {
		fmt.Fprintf(&b, "  %-8s %s\n", name, bench.ScenarioHelp[name])
	}
	return b.String()
}
