package report

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx/bench"
)

// plotHelper is the program that draws plots; it is kept out of the sbx
// binary because the charting library's fonts would slow down every
// sandbox's init, which re-executes the sbx binary.
const plotHelper = "sbx-bench-plot"

// FindPlotHelper finds sbx-bench-plot next to this binary or in PATH.
func FindPlotHelper() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), plotHelper); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(plotHelper)
	if err != nil {
		return "", fmt.Errorf("--plot needs %s next to sbx or in PATH: build it with `go build -o bin/%s ./bench/chart/cmd/%s`", plotHelper, plotHelper, plotHelper)
	}
	return p, nil
}

// DrawPlot runs the plot helper on the report's JSON.
func DrawPlot(ctx context.Context, helper string, rep *bench.Report, jsonPath, plotPath string) error {
	if jsonPath == "" {
		f, err := os.CreateTemp("", "sbx-bench-*.json")
		if err != nil {
			return err
		}
		f.Close()
		defer os.Remove(f.Name())
		jsonPath = f.Name()
		if err := WriteJSON(jsonPath, rep); err != nil {
			return err
		}
	}
	out, err := exec.CommandContext(ctx, helper, jsonPath, plotPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("draw the plot: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
