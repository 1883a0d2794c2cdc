package driver

import (
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
)

func TestMain(m *testing.M) {
	// libcontainer re-executes the test binary to set sandboxes up.
	isolate.Init()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "driver: the tests start real sandboxes and need root (run `make test` as root)")
		os.Exit(1)
	}
	// Nomad's driver harness leaves two empty temporary directories per
	// allocation directory it makes (its cleanup removes only what is
	// inside them): the tests' temporary files go under a directory of
	// their own, removed at the end.
	tmp, err := os.MkdirTemp("", "sbx-driver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", tmp)
	// The sandboxes go under a parent cgroup of this test binary's own,
	// removed at the end, never under the host's default one.
	releaseParent := cgroup.PrivateParent("sbx-test-driver")
	code := m.Run()
	if err := releaseParent(); err != nil {
		fmt.Fprintln(os.Stderr, "driver: remove the tests' parent cgroup:", err)
		code = 1
	}
	if err := os.RemoveAll(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "driver: remove the tests' temporary directory:", err)
		code = 1
	}
	os.Exit(code)
}
