// Command sbx-executor is PID 1 of every long-lived sandbox: the executor
// (package executor) in a binary that links only the standard library,
// x/sys and the executor's own packages, so that it starts in a fraction of
// the time of the full sbx binary. sbx embeds it (internal/helperbin) and
// mounts it read-only at /.sbx/executor. Its command line is the same as
// "sbx executor": sbx-executor executor [flags].
package main

import (
	"fmt"
	"os"

	"github.com/sbxrun/sbx/executor"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "executor" {
		fmt.Fprintln(os.Stderr, "usage: sbx-executor executor [--listen-fd N | --socket PATH] [flags]; see sbx-executor executor -h")
		os.Exit(125)
	}
	os.Exit(executor.Main(os.Args[2:]))
}
