package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sbxrun/sbx"
)

// Volumes writes named volumes as sbx volume ls shows them: docker's
// table (DRIVER is always local), only the names with quiet, or JSON.
func Volumes(w io.Writer, list []*sbx.VolumeInfo, quiet bool, format string) error {
	switch {
	case quiet:
		for _, v := range list {
			fmt.Fprintln(w, v.Name)
		}
		return nil
	case format == "json":
		if list == nil {
			list = []*sbx.VolumeInfo{}
		}
		return JSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "DRIVER\tVOLUME NAME\tCREATED\tUSED BY")
	for _, v := range list {
		used := make([]string, len(v.UsedBy))
		for i, id := range v.UsedBy {
			used[i] = (&sbx.Sandbox{ID: id}).ShortID()
		}
		fmt.Fprintf(tw, "local\t%s\t%s\t%s\n", v.Name, Age(v.Created), strings.Join(used, ","))
	}
	return tw.Flush()
}
