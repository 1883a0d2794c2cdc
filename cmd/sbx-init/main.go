// Command sbx-init is the small init of one-shot sandboxes in Go: the same
// code as "sbx reaper", in a binary that links only the standard library
// and x/sys. sbx embeds the C build of the same init (c/sbx-init.c, which
// starts in a fraction of a Go program's time) and mounts it at /.sbx/init
// in every one-shot run; this one is for a program that embeds sbx and
// builds its helpers with the Go toolchain alone (HostConfig.Init), and
// internal/helperbin's tests hold both to the same behaviour.
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
