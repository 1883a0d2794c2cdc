// Package runner runs one sbx bench measurement end to end: it checks the
// request, prepares the workload (a root filesystem or a cached image),
// runs the scenarios against sbx and the runtimes compared, and prints
// and writes the report. sbx bench is its command line; a program that
// measures sbx on its own schedule calls Run.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/bench/report"
)

// Request is one measurement, as sbx bench's flags give it.
type Request struct {
	// Scenarios to run (bench.ScenarioNames); none: all.
	Scenarios []string
	// Rootfs (an unpacked root) or Image (a cached image), not both;
	// neither: a busybox root built once.
	Rootfs, Image string
	// Compare are the runtimes measured beside sbx (bench.AnchorNames).
	Compare []string
	// Samples and Warmup are the measured and the uncounted rounds per
	// scenario; MaxTime bounds one scenario's measured rounds.
	Samples, Warmup int
	MaxTime         time.Duration
	// JSONPath and PlotPath (.svg or .png) are written when set.
	JSONPath, PlotPath string
	// Format of the printed table: text or markdown.
	Format string
	// DockerHost and StartDockerd configure the docker runtime.
	DockerHost   string
	StartDockerd bool
	// SbxBin is the static sbx binary measured (default: this program).
	SbxBin string
	// Density is how many idle sandboxes the density scenario creates.
	Density int
	// Root and RunRoot are sbx's state directories.
	Root, RunRoot string
}

// Run checks r, measures, prints the table to out and progress lines to
// progress. It fails when a check fails, when ctx ends, or when sbx itself
// failed a scenario (a compared runtime's failure is in the report).
func Run(ctx context.Context, r *Request, out, progress io.Writer) error {
	plotter, err := r.check()
	if err != nil {
		return err
	}
	bin := r.SbxBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate the sbx binary: %w", err)
		}
		bin = exe
	}
	w := bench.Workload{Args: []string{"true"}, SbxBin: bin, RunRoot: r.RunRoot}
	unmount, err := bench.PrepareWorkload(ctx, &w, r.Rootfs, r.Image, r.Root)
	if err != nil {
		return err
	}
	defer func() { _ = unmount() }()
	if err := w.Validate(); err != nil {
		return err
	}
	cmp := bench.Compare{Runtimes: r.Compare, DockerHost: r.DockerHost, StartDockerd: r.StartDockerd}
	fmt.Fprintln(progress, "sbx bench: measuring the machine's background load for 1s")
	machine := bench.DescribeMachine(time.Second)
	list, err := bench.Scenarios(r.Scenarios, w, cmp, r.Samples, r.Density)
	if err != nil {
		return err
	}
	rep := bench.Run(ctx, list, bench.Options{Samples: r.Samples, Warmup: r.Warmup, MaxTime: r.MaxTime,
		Progress: func(msg string) { fmt.Fprintln(progress, "sbx bench:", msg) }})
	machine.LoadEnd = bench.LoadAvg()
	rep.Machine = machine
	if r.Format == "markdown" {
		err = report.Markdown(out, rep)
	} else {
		err = report.Text(out, rep)
	}
	if err != nil {
		return fmt.Errorf("print the report: %w", err)
	}
	if r.JSONPath != "" {
		if err := report.WriteJSON(r.JSONPath, rep); err != nil {
			return err
		}
	}
	if r.PlotPath != "" {
		if err := report.DrawPlot(ctx, plotter, rep, r.JSONPath, r.PlotPath); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	for _, sc := range rep.Scenarios {
		if len(sc.Subjects) > 0 && sc.Subjects[0].Summary == nil {
			return fmt.Errorf("scenario %s: sbx itself failed: %s", sc.Name, sc.Subjects[0].Error)
		}
	}
	return nil
}

// check refuses a request that cannot run, before anything is measured,
// and finds the plot helper when a plot is asked for.
func (r *Request) check() (plotter string, err error) {
	if err := bench.CheckScenarios(r.Scenarios); err != nil {
		return "", err
	}
	for _, rt := range r.Compare {
		if !slices.Contains(bench.AnchorNames, rt) {
			return "", fmt.Errorf("unknown runtime %q in --compare: choose from %s", rt, strings.Join(bench.AnchorNames, ","))
		}
	}
	switch r.Format {
	case "text", "markdown":
	default:
		return "", fmt.Errorf("invalid --format %q: use text or markdown", r.Format)
	}
	if r.PlotPath != "" {
		if ext := strings.ToLower(filepath.Ext(r.PlotPath)); ext != ".svg" && ext != ".png" {
			return "", fmt.Errorf("--plot %s: use a .svg or .png file name", r.PlotPath)
		}
		if plotter, err = report.FindPlotHelper(); err != nil {
			return "", err
		}
	}
	if r.Density < 1 || r.Density > 1000 {
		return "", errors.New("--density must be between 1 and 1000")
	}
	if r.Samples < 1 || r.Warmup < 0 {
		return "", errors.New("--samples must be at least 1 and --warmup at least 0")
	}
	if r.Rootfs != "" && r.Image != "" {
		return "", errors.New("give --rootfs or --image, not both")
	}
	if os.Geteuid() != 0 {
		return "", errors.New("sbx bench needs root: it creates namespaces, cgroups and mounts")
	}
	return plotter, nil
}
