package render

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sbxrun/sbx"
)

// Snapshots writes sbx snapshot ls's table.
func Snapshots(w io.Writer, list []*sbx.Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tIMAGE\tSIZE\tCREATED")
	for _, s := range list {
		src := s.SourceName
		if src == "" && len(s.SourceID) >= 12 {
			src = s.SourceID[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", s.Name, src, ImageOf(&s.Options), humanBytes(s.Bytes), now.Sub(s.Created).Round(time.Second))
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fkB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
