package render

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/sbxrun/sbx"
)

// Progress shows the progress of a pull or an import: a bar per layer on
// a terminal (redrawn at most every 100 ms), a line per finished layer
// on anything else, nothing when quiet. Update is the callback of
// Images.PullImage and ImportOptions.Progress; Finish draws the last
// state. It is not safe for concurrent use.
type Progress struct {
	w      io.Writer
	quiet  bool
	tty    bool
	layers []sbx.PullProgress
	start  []time.Time
	drawn  int
	last   time.Time
}

// NewProgress shows progress on w, a terminal or not.
func NewProgress(w io.Writer, quiet bool) *Progress {
	p := &Progress{w: w, quiet: quiet}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

// Update takes one layer's new state.
func (p *Progress) Update(u sbx.PullProgress) {
	if p.quiet {
		return
	}
	for len(p.layers) < u.Count {
		p.layers = append(p.layers, sbx.PullProgress{})
		p.start = append(p.start, time.Time{})
	}
	if u.Index < 0 || u.Index >= len(p.layers) {
		return
	}
	prev := p.layers[u.Index].Phase
	p.layers[u.Index] = u
	if u.Phase == "downloading" && p.start[u.Index].IsZero() {
		p.start[u.Index] = time.Now()
	}
	if !p.tty {
		if u.Phase != prev && (u.Phase == "done" || u.Phase == "cached") {
			fmt.Fprintf(p.w, "layer %d/%d %s: %s %s\n", u.Index+1, u.Count, ShortID(u.Layer), u.Phase, Bytes(u.TotalBytes))
		}
		return
	}
	if time.Since(p.last) < 100*time.Millisecond && u.Phase == prev {
		return
	}
	p.redraw()
}

func (p *Progress) redraw() {
	p.last = time.Now()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	for i, l := range p.layers {
		fmt.Fprintf(&b, "\x1b[2K%s %-11s %s\n", ShortID(l.Layer), l.Phase, p.bar(i, l))
	}
	p.drawn = len(p.layers)
	_, _ = io.WriteString(p.w, b.String())
}

func (p *Progress) bar(i int, l sbx.PullProgress) string {
	switch l.Phase {
	case "downloading", "unpacking":
	case "done", "cached":
		return Bytes(l.TotalBytes)
	default:
		return ""
	}
	const width = 30
	fill := 0
	if l.TotalBytes > 0 {
		fill = int(max(0, min(width, l.CurrentBytes*width/l.TotalBytes)))
	}
	// The rate is the download's: while unpacking the bytes no longer
	// flow, and a rate over the whole time would only decay.
	rate := ""
	if el := time.Since(p.start[i]).Seconds(); el > 0 && l.Phase == "downloading" {
		rate = Bytes(int64(float64(l.CurrentBytes)/el)) + "/s"
	}
	return fmt.Sprintf("[%s%s] %s/%s %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), Bytes(l.CurrentBytes), Bytes(l.TotalBytes), rate)
}

// Finish draws the final state on a terminal.
func (p *Progress) Finish() {
	if p.tty && !p.quiet && len(p.layers) > 0 {
		p.redraw()
	}
}
