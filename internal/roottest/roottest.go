// Package roottest marks the tests that need root. `make test` runs every
// test as root against the real kernel; `make unit` (`go test -short`) runs
// only the tests that need neither root nor the network, as any user, root
// included. A test that needs root says so with Require; a package whose
// tests all need root says so in its TestMain with Package, and one whose
// runnable examples need root with SkipExamples. Under -short such tests
// are skipped, naming what needs root; without -short they run, and as
// another user than root they fail saying to run them as root, so a
// missing privilege never passes quietly.
package roottest

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// Require stops t under `go test -short` (make unit: skipped) and when the
// process is not root (failed). why says what needs root ("it mounts
// overlays and creates cgroups").
func Require(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs root (%s): make test runs it", why)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (%s): run it as root (make test); make unit runs the tests that need none", why)
	}
}

// Package is for the TestMain of a package whose tests all need root, after
// flag.Parse. It reports whether the tests should run; when they should
// not, it has printed why and the caller exits with code: 0 under -short
// (make unit leaves the package out), 1 when the process is not root.
func Package(name, why string) (run bool, code int) {
	if testing.Short() {
		fmt.Fprintf(os.Stderr, "%s: skipped: every test needs root (%s); make test runs them\n", name, why)
		return false, 0
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "%s: every test needs root (%s): run them as root (make test); make unit runs the tests that need none\n", name, why)
		return false, 1
	}
	return true, 0
}

// SkipExamples is for the TestMain of a package whose runnable examples
// need root, after flag.Parse: examples cannot skip themselves, so under
// `go test -short` it leaves them out (with -test.skip), saying so, and
// reports true. Otherwise they run (and fail without root).
func SkipExamples(name, why string) bool {
	if !testing.Short() {
		return false
	}
	if err := flag.Set("test.skip", "^Example"); err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot leave out the examples that need root: %v\n", name, err)
		return false
	}
	fmt.Fprintf(os.Stderr, "%s: examples skipped: they need root (%s); make test runs them\n", name, why)
	return true
}
