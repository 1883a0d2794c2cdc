package runner

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx/bench"
)

// Register adds sbx bench's flags to fs; Scenarios, Root and RunRoot are
// the caller's.
func (o *Request) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Rootfs, "rootfs", "", "unpacked root filesystem every runtime uses (read-only); it needs the programs true and sleep")
	fs.StringVar(&o.Image, "image", "", "cached image sbx runs (sbx run IMAGE); the other runtimes use its unpacked layers (default: a busybox root built once under "+bench.DefaultRootDir+" and imported into the bench's own image store)")
	fs.StringSliceVar(&o.Compare, "compare", nil, "runtimes to compare with: "+strings.Join(bench.AnchorNames, ","))
	fs.IntVar(&o.Samples, "samples", 100, "measured rounds per scenario (p99 needs 100)")
	fs.IntVar(&o.Warmup, "warmup", 5, "warm-up rounds per scenario, not counted")
	fs.DurationVar(&o.MaxTime, "max-time", 5*time.Minute, "time limit of the measured rounds of one scenario")
	fs.StringVar(&o.JSONPath, "json", "", "write the full report, samples included, as JSON to this file")
	fs.StringVar(&o.PlotPath, "plot", "", "draw the distributions to this .svg or .png file")
	fs.StringVar(&o.Format, "format", "text", "table format: text or markdown")
	fs.StringVar(&o.DockerHost, "docker-host", "", "docker daemon socket for the docker runtime (default $DOCKER_HOST or unix:///var/run/docker.sock)")
	fs.BoolVar(&o.StartDockerd, "start-dockerd", false, "start a private dockerd for the docker runtime when none answers, and stop it afterwards")
	fs.IntVar(&o.Density, "density", 1000, "idle sandboxes the density scenario creates (1 to 1000)")
	fs.StringVar(&o.SbxBin, "sbx-bin", "", "statically linked sbx binary to measure (default: this one)")
}

// ScenarioList lists the scenarios of sbx bench, one indented line each,
// for its help.
func ScenarioList() string {
	var b strings.Builder
	for _, name := range bench.ScenarioNames {
		fmt.Fprintf(&b, "  %-8s %s\n", name, bench.ScenarioHelp[name])
	}
	return b.String()
}
