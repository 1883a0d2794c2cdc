// Command sbx-init is the small init of one-shot sandboxes: the same code
// as "sbx reaper", in a binary that links only the standard library and
// x/sys, so that it starts in a fraction of the time of the full sbx
// binary. sbx embeds it and mounts it at /.sbx/init in every one-shot run.
package main

import (
	"fmt"
	"os"

	"github.com/sbxrun/sbx/isolate/reaper"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "reaper" {
		fmt.Fprintln(os.Stderr, "usage: sbx-init reaper [--status-fd N] [--lifeline-fd N] [--seccomp-fd N] [--tty] -- CMD [ARG...]")
		os.Exit(125)
	}
	os.Exit(reaper.Main(os.Args[2:]))
}
