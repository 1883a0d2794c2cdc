package cgroup

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the package's tests under a parent cgroup of their own:
// TestParentMemoryLimit creates the parent and changes its budget, which on
// the host's default parent left an empty /sbx behind in every v1
// hierarchy and touched every other sbx user's budget.
func TestMain(m *testing.M) {
	release := PrivateParent("sbx-test-cgroup")
	code := m.Run()
	if err := release(); err != nil {
		fmt.Fprintln(os.Stderr, "cgroup: remove the tests' parent cgroup:", err)
		code = 1
	}
	os.Exit(code)
}
