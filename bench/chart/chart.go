// Package chart draws a bench.Report's latency distributions with gonum's
// plot library. It lives apart from the sbx binary (see the sbx-bench-plot
// command) because the library's fonts would make every sandbox's init, a
// re-exec of the sbx binary, slower to start.
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/sbxrun/sbx/bench"
)

// palette gives sbx its own colour and the anchors muted ones.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// Draw draws every scenario's distributions side by side as box plots
// (median, quartiles, whiskers to 1.5 IQR, outliers), one panel per
// scenario on a log axis, and writes an .svg or .png file. Subjects without
// figures are marked "failed" in place of their box.
func Draw(rep *bench.Report, path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("plot file %q: use a .svg or .png name", path)
	}
	if len(rep.Scenarios) == 0 {
		return fmt.Errorf("nothing to plot: no scenario ran")
	}
	var plots [][]*plot.Plot
	for i := range rep.Scenarios {
		p, err := panel(&rep.Scenarios[i])
		if err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{p})
	}
	width := 8 * vg.Inch
	height := vg.Length(len(plots)) * 2.6 * vg.Inch
	var c interface {
		vg.CanvasSizer
		WriteTo(io.Writer) (int64, error)
	}
	if ext == ".svg" {
		c = vgsvg.New(width, height)
	} else {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))}
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadY: vg.Millimeter * 6}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write plot: %w", err)
	}
	return f.Close()
}

// panel draws one scenario.
func panel(sc *bench.ScenarioResult) (*plot.Plot, error) {
	p := plot.New()
	better := "lower is better"
	if sc.HigherIsBetter {
		better = "higher is better"
	}
	p.Title.Text = fmt.Sprintf("%s (%s, %s, log scale)", sc.Name, sc.Unit, better)
	p.Y.Label.Text = sc.Unit
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	var names []string
	var failed []int
	for i, s := range sc.Subjects {
		// Long names break at their first dash so neighbours do not overlap.
		label := strings.Replace(s.Name, "-", "\n", 1)
		if s.Summary != nil {
			label = fmt.Sprintf("%s\np50 %s", label, fmtV(s.Summary.P50))
		}
		names = append(names, label)
		var vals plotter.Values
		for _, v := range s.Samples {
			if v > 0 {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			failed = append(failed, i)
			continue
		}
		b, err := plotter.NewBoxPlot(vg.Points(28), float64(i), vals)
		if err != nil {
			return nil, fmt.Errorf("box plot of %s: %w", s.Name, err)
		}
		b.FillColor = palette[i%len(palette)]
		b.MedianStyle.Width = vg.Points(2)
		p.Add(b)
		lo, hi = math.Min(lo, s.Summary.Min), math.Max(hi, s.Summary.Max)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	if len(failed) > 0 {
		var xys plotter.XYs
		var labels []string
		for _, i := range failed {
			xys = append(xys, plotter.XY{X: float64(i), Y: math.Sqrt(p.Y.Min * p.Y.Max)})
			labels = append(labels, "failed")
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
			l.TextStyle[i].XAlign = draw.XCenter
		}
		p.Add(l)
	}
	p.NominalX(names...)
	return p, nil
}

// logTicks marks powers of ten and the 2 and 5 multiples between them,
// labelled, so that a log axis spanning less than a decade still reads.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		base := math.Pow(10, e)
		for _, m := range []float64{1, 2, 5} {
			v := m * base
			if v < min || v > max {
				continue
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: trimFloat(v)})
		}
	}
	return ticks
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// fmtV formats a figure as the tables do.
func fmtV(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
