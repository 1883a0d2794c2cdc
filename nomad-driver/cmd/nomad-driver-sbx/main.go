// Command nomad-driver-sbx is the sbx task driver plugin for Nomad. Install
// it in the client's plugin_dir and configure it with a
// `plugin "nomad-driver-sbx"` block (see docs/nomad.md); jobs then use
// driver = "sbx".
package main

import (
	"context"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/sbxrun/sbx/nomad-driver/driver"
)

func main() {
	plugins.ServeCtx(func(ctx context.Context, l hclog.Logger) interface{} { return driver.New(ctx, l) })
}
