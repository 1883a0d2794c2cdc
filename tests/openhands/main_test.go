// Package openhands_test runs OpenHands' own clients (the SDK's
// APIRemoteWorkspace and RemoteConversation, the app server's
// RemoteSandboxService) against sbx's Runtime API, in a package of its own
// so that its minutes never count against the tests package's timeout.
package openhands_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/internal/roottest"
	"github.com/sbxrun/sbx/sandbox"
)

// sbxBin is the static sbx binary the client sandboxes are made with
// ($SBX_BIN; `make test` sets it).
var sbxBin = os.Getenv("SBX_BIN")

func TestMain(m *testing.M) {
	sandbox.Init() // the Host starts sandboxes in this process
	flag.Parse()
	if run, code := roottest.Package("tests/openhands", "OpenHands' clients against a real sbx serve"); !run {
		os.Exit(code)
	}
	helperbin.ExitUnlessEmbedded("tests/openhands")
	if sbxBin == "" {
		fmt.Fprintln(os.Stderr, "tests/openhands: need SBX_BIN, a static sbx binary (make build; make test sets it)")
		os.Exit(1)
	}
	// A private parent cgroup: every sandbox of these tests lives under
	// it, so nothing of another sbx user is touched or counted.
	releaseParent := cgroup.PrivateParent("sbx-test-oh")
	code := m.Run()
	_ = releaseParent()
	os.Exit(code)
}
