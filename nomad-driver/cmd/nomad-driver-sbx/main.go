// Command nomad-driver-sbx is the sbx task driver plugin for Nomad. Install
// it in the client's plugin_dir and configure it with a
// `plugin "nomad-driver-sbx"` block (see docs/nomad.md); jobs then use
// driver = "sbx".
package main

import (
	"context"
	"os"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/nomad-driver/driver"
)

func main() {
	// libcontainer re-executes this binary to set each sandbox up.
	isolate.Init()
	go exitWhenOrphaned()
	plugins.ServeCtx(func(ctx context.Context, l hclog.Logger) interface{} { return driver.New(ctx, l) })
}

// exitWhenOrphaned ends the plugin when the Nomad client that started it
// dies (kill -9, a crash): the restarted client starts a plugin of its own
// and re-attaches to the tasks, which run on without either. Without this
// the old plugin would linger, forwarding logs next to the new one.
func exitWhenOrphaned() {
	parent := os.Getppid()
	for range time.Tick(time.Second) {
		if os.Getppid() != parent {
			os.Exit(0)
		}
	}
}
