package driver

import (
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/isolate"
)

func TestMain(m *testing.M) {
	// libcontainer re-executes the test binary to set sandboxes up.
	isolate.Init()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "driver: the tests start real sandboxes and need root (run `make test` as root)")
		os.Exit(1)
	}
	os.Exit(m.Run())
}
