package sandbox

import (
	"os"
	"testing"

	"github.com/sbxrun/sbx/isolate"
)

// TestMain makes the test binary libcontainer's init when it is
// re-executed to set a sandbox up.
func TestMain(m *testing.M) {
	isolate.Init()
	os.Exit(m.Run())
}
