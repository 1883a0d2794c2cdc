package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/bench/report"
)

type benchOptions struct {
	rootfs       string
	image        string
	compare      []string
	samples      int
	warmup       int
	maxTime      time.Duration
	jsonPath     string
	plotPath     string
	format       string
	dockerHost   string
	startDockerd bool
	sbxBin       string
	density      int
}

func benchCmd(a *app) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [flags] [--image REF | --rootfs DIR] [SCENARIO...]",
		Short: "Measure sandbox start-up latency against other runtimes",
		Long: `Measure sbx's start-up latency and, with --compare, the runtimes users would
pick instead, on the same root filesystem with equivalent isolation.

Scenarios (all by default): ` + strings.Join(bench.ScenarioNames, ", ") + `.
  cold     one-shot "sbx run --rootfs DIR true" as its own process
  lib      the same run in-process through sandbox.Host.Run
  ready    create a long-lived sandbox until its executor answers
  exec     one /v1/exec round trip of "true" in a running sandbox
  session  one shell-session command round trip
  churn    sandboxes created and removed per second at concurrency 1-16
  density  N idle sandboxes: time of each create, memory per sandbox

Each scenario runs warm-up rounds, then interleaved measured rounds, and prints
min, p50, p90, p99 and max with the ratio of sbx to each runtime, and where
sbx's time goes. A runtime that is missing or fails is reported with its error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.host != "" {
				return exitErr("sbx bench acts on this host only and does not take --host (or SBX_HOST)")
			}
			return runBench(cmd, a, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rootfs, "rootfs", "", "unpacked root filesystem every runtime uses (read-only); it needs the programs true and sleep")
	f.StringVar(&o.image, "image", "", "cached image sbx runs (sbx run IMAGE); the other runtimes use its unpacked layers (default: a busybox root built once under "+bench.DefaultRootDir+" and imported into the bench's own image store)")
	f.StringSliceVar(&o.compare, "compare", nil, "runtimes to compare with: "+strings.Join(bench.AnchorNames, ","))
	f.IntVar(&o.samples, "samples", 100, "measured rounds per scenario (p99 needs 100)")
	f.IntVar(&o.warmup, "warmup", 5, "warm-up rounds per scenario, not counted")
	f.DurationVar(&o.maxTime, "max-time", 5*time.Minute, "time limit of the measured rounds of one scenario")
	f.StringVar(&o.jsonPath, "json", "", "write the full report, samples included, as JSON to this file")
	f.StringVar(&o.plotPath, "plot", "", "draw the distributions to this .svg or .png file")
	f.StringVar(&o.format, "format", "text", "table format: text or markdown")
	f.StringVar(&o.dockerHost, "docker-host", "", "docker daemon socket for the docker runtime (default $DOCKER_HOST or unix:///var/run/docker.sock)")
	f.BoolVar(&o.startDockerd, "start-dockerd", false, "start a private dockerd for the docker runtime when none answers, and stop it afterwards")
	f.IntVar(&o.density, "density", 1000, "idle sandboxes the density scenario creates (1 to 1000)")
	f.StringVar(&o.sbxBin, "sbx-bin", "", "statically linked sbx binary to measure (default: this one)")
	return cmd
}

func runBench(cmd *cobra.Command, a *app, o *benchOptions, args []string) error {
	fail := exitErr
	if err := bench.CheckScenarios(args); err != nil {
		return fail("%v", err)
	}
	for _, r := range o.compare {
		if !slices.Contains(bench.AnchorNames, r) {
			return fail("unknown runtime %q in --compare: choose from %s", r, strings.Join(bench.AnchorNames, ","))
		}
	}
	switch o.format {
	case "text", "markdown":
	default:
		return fail("invalid --format %q: use text or markdown", o.format)
	}
	if o.plotPath != "" {
		if ext := strings.ToLower(filepath.Ext(o.plotPath)); ext != ".svg" && ext != ".png" {
			return fail("--plot %s: use a .svg or .png file name", o.plotPath)
		}
	}
	var plotter string
	if o.plotPath != "" {
		var err error
		if plotter, err = report.FindPlotHelper(); err != nil {
			return fail("%v", err)
		}
	}
	if o.density < 1 || o.density > 1000 {
		return fail("--density must be between 1 and 1000")
	}
	if o.samples < 1 || o.warmup < 0 {
		return fail("--samples must be at least 1 and --warmup at least 0")
	}
	if os.Geteuid() != 0 {
		return fail("sbx bench needs root: it creates namespaces, cgroups and mounts")
	}
	if o.rootfs != "" && o.image != "" {
		return fail("give --rootfs or --image, not both")
	}
	bin := o.sbxBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail("locate the sbx binary: %v", err)
		}
		bin = exe
	}
	w := bench.Workload{Args: []string{"true"}, SbxBin: bin, RunRoot: a.runRoot}
	unmount, err := bench.PrepareWorkload(cmd.Context(), &w, o.rootfs, o.image, a.root)
	if err != nil {
		return fail("%v", err)
	}
	defer func() { _ = unmount() }()
	if err := w.Validate(); err != nil {
		return fail("%v", err)
	}
	cmp := bench.Compare{Runtimes: o.compare, DockerHost: o.dockerHost, StartDockerd: o.startDockerd}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stderr := cmd.ErrOrStderr()
	fmt.Fprintln(stderr, "sbx bench: measuring the machine's background load for 1s")
	machine := bench.DescribeMachine(time.Second)
	list, err := bench.Scenarios(args, w, cmp, o.samples, o.density)
	if err != nil {
		return fail("%v", err)
	}
	rep := bench.Run(ctx, list, bench.Options{Samples: o.samples, Warmup: o.warmup, MaxTime: o.maxTime,
		Progress: func(msg string) { fmt.Fprintln(stderr, "sbx bench:", msg) }})
	machine.LoadEnd = bench.LoadAvg()
	rep.Machine = machine

	out := cmd.OutOrStdout()
	if o.format == "markdown" {
		err = report.Markdown(out, rep)
	} else {
		err = report.Text(out, rep)
	}
	if err != nil {
		return fail("print the report: %v", err)
	}
	if o.jsonPath != "" {
		if err := report.WriteJSON(o.jsonPath, rep); err != nil {
			return fail("%v", err)
		}
	}
	if o.plotPath != "" {
		if err := report.DrawPlot(ctx, plotter, rep, o.jsonPath, o.plotPath); err != nil {
			return fail("%v", err)
		}
	}
	if ctx.Err() != nil {
		return fail("interrupted")
	}
	for _, sc := range rep.Scenarios {
		if len(sc.Subjects) > 0 && sc.Subjects[0].Summary == nil {
			return fail("scenario %s: sbx itself failed: %s", sc.Name, sc.Subjects[0].Error)
		}
	}
	return nil
}
