// Command sbx-bench-plot draws the JSON report of `sbx bench --json` as an
// .svg or .png file. `sbx bench --plot` runs it; it is a separate binary so
// that the charting library's fonts stay out of the sbx binary, which every
// sandbox re-executes as its init.
//
// Usage: sbx-bench-plot REPORT.json OUT.svg|OUT.png
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/sbxrun/sbx/bench"
	"github.com/sbxrun/sbx/bench/chart"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sbx-bench-plot REPORT.json OUT.svg|OUT.png")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "sbx-bench-plot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("read report %s: %w", in, err)
	}
	return chart.Draw(&rep, out)
}
