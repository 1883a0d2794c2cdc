package sandbox

import (
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
)

// TestMain gives the package's sandboxes a private parent cgroup, so that
// their cgroups and the parent's memory budget (changed by some tests) are
// apart from every other sbx user's on the host.
func TestMain(m *testing.M) {
	os.Setenv(cgroup.ParentEnv, fmt.Sprintf("sbx-test-%d", os.Getpid()))
	code := m.Run()
	if os.Geteuid() == 0 {
		_ = cgroup.RemoveParentIfEmpty()
	}
	os.Exit(code)
}
