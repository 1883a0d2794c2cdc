// Package sandbox runs sandboxes on this machine: Open returns a *Host, the
// local implementation of the contract's sbx.Sandboxes and sbx.Images, and
// the one place where sbx is wired together (state layout, helper
// binaries, image cache, network and its pool, host facts, policy, image
// GC's rule to keep the layers of recorded sandboxes).
//
// A program that uses it must call Init first in main (libcontainer
// re-executes the program to set each sandbox up), be built with cgo,
// libseccomp and the seccomp build tag, and run as root; see
// docs/embedding.md.
package sandbox

import "github.com/sbxrun/sbx/isolate"

// Init must be the first call in the main function (or TestMain) of every
// program that starts sandboxes: libcontainer re-executes the program's own
// binary to set each sandbox up, and in that process Init takes over and
// never returns. In every other process it returns at once. Without it,
// creates and runs fail with an error that says to add it.
//
//	func main() {
//		sandbox.Init()
//		...
//	}
func Init() { isolate.Init() }
