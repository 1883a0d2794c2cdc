// Command nomad-driver-sbx is the sbx task driver plugin for Nomad. Install
// it in the client's plugin_dir and configure it with a
// `plugin "nomad-driver-sbx"` block (see docs/nomad.md); jobs then use
// driver = "sbx".
package main

import (
	"context"
	"os"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/nomad-driver/driver"
)

func main() {
	// libcontainer re-executes this binary to set each sandbox up.
	isolate.Init()
	var drv atomic.Pointer[driver.Driver]
	go exitWhenOrphaned(&drv)
	plugins.ServeCtx(func(ctx context.Context, l hclog.Logger) interface{} {
		d := driver.New(ctx, l)
		drv.Store(d)
		return d
	})
}

// exitWhenOrphaned ends the plugin when the Nomad client that started it
// dies (kill -9, a crash): the restarted client starts a plugin of its own
// and re-attaches to the tasks, which run on without either. Without this
// the old plugin would linger, forwarding logs next to the new one. The
// driver first lets go of its tasks, so that their log forwarding stops
// between two chunks and the new plugin resumes exactly there.
func exitWhenOrphaned(drv *atomic.Pointer[driver.Driver]) {
	parent := os.Getppid()
	for range time.Tick(time.Second) {
		if os.Getppid() != parent {
			if d := drv.Load(); d != nil {
				d.Detach(2 * time.Second)
			}
			os.Exit(0)
		}
	}
}
