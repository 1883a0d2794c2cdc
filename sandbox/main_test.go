package sandbox

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestMain makes the test binary libcontainer's init when it is
// re-executed to set a sandbox up, and gives the package's sandboxes a
// private parent cgroup, so that their cgroups and the parent's memory
// budget (changed by some tests) are apart from every other sbx user's on
// the host.
//
// The runnable examples find a busybox root file system in
// $SBX_EXAMPLE_ROOTFS. With SBX_HELPER_FILL=1 the binary is
// TestPoolFillKilled's helper instead of running tests.
func TestMain(m *testing.M) {
	Init()
	if os.Getenv("SBX_HELPER_FILL") == "1" {
		helperFill()
	}
	flag.Parse()
	skipped := roottest.SkipExamples("sandbox", "they start sandboxes")
	if !testing.Short() {
		helperbin.ExitUnlessEmbedded("sandbox")
	}
	// Helper processes (this binary re-run by a test) keep their parent's.
	releaseParent := cgroup.PrivateParent("sbx-test")
	if os.Geteuid() == 0 && !skipped {
		root, err := fixture.BusyboxRootfsDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, "busybox fixture for the examples:", err, "(make deps-test installs busybox-static)")
			os.Exit(1)
		}
		os.Setenv("SBX_EXAMPLE_ROOTFS", root)
	}
	code := m.Run()
	_ = releaseParent()
	os.Exit(code)
}
