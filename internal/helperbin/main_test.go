package helperbin

import (
	"os"
	"testing"
)

// TestMain stops at once, with one line saying to run `make helpers`, in a
// checkout where the helpers were never built: every test here needs them.
func TestMain(m *testing.M) {
	ExitUnlessEmbedded("internal/helperbin")
	os.Exit(m.Run())
}
