// Package isolate builds libcontainer configurations from a Spec and runs
// processes with them.
//
// Starting a sandbox, libcontainer re-executes the calling program as its
// init stage ("PROGRAM init"), which sets up namespaces, mounts and
// capabilities and then executes the sandbox's PID 1. isolate hands that
// stage to sbx-lcinit, a small static build of libcontainer's init that
// every program linking sbx embeds (cmd/sbx-lcinit, internal/helperbin): a
// C constructor in this package executes it in place of the program before
// the program's Go runtime starts, so a start pays the start-up of
// libcontainer alone, not the whole program's (see lcinit.go). The handle
// it runs from is opened through a private read-only overlay, as
// libcontainer seals its own re-executed binary, so sandboxed code cannot
// write to it. Programs still call Init first in main: it keeps the main
// thread out of libcontainer's namespace work and runs libcontainer's init
// itself where no sbx-lcinit is at hand.
package isolate

// A build without cgo fails with a message from sbx (package needcgo).
import _ "github.com/sbxrun/sbx/internal/needcgo"
