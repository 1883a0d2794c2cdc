package sandbox

import (
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
)

// TestMain makes the test binary libcontainer's init when it is
// re-executed to set a sandbox up, and gives the package's sandboxes a
// private parent cgroup, so that their cgroups and the parent's memory
// budget (changed by some tests) are apart from every other sbx user's on
// the host.
func TestMain(m *testing.M) {
	isolate.Init()
	os.Setenv(cgroup.ParentEnv, fmt.Sprintf("sbx-test-%d", os.Getpid()))
	code := m.Run()
	if os.Geteuid() == 0 {
		_ = cgroup.RemoveParentIfEmpty()
	}
	os.Exit(code)
}
