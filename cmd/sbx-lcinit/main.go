// Command sbx-lcinit is libcontainer's init stage ("runc init") in a
// binary of its own: the program that starts a sandbox re-executes itself
// as libcontainer's init, and isolate's constructor hands over to this
// small binary before that program's Go runtime starts, so the start pays
// the Go start-up of libcontainer alone instead of the whole program's.
// sbx embeds it (internal/helperbin); it is never run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor joins and creates the namespaces before the
	// Go runtime starts.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "init" && os.Getenv("_LIBCONTAINER_INITPIPE") != "" {
		libcontainer.Init() // never returns
	}
	fmt.Fprintln(os.Stderr, "sbx-lcinit: this is libcontainer's init stage of sbx sandboxes; sbx runs it, never run it by hand")
	os.Exit(125)
}
