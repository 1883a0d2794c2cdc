package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadSettings checks that each bad setting is refused with a
// message naming it, before the host is opened (no root needed: nothing
// is created under Root).
func TestRunRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"tcp without token", func(o *Options) { o.Listen = "127.0.0.1:0" }, "token"},
		{"missing token file", func(o *Options) { o.TokenFile = filepath.Join(dir, "nope") }, "--token-file"},
		{"bad body size", func(o *Options) { o.MaxBody = "lots" }, "max-body-size"},
		{"negative sandboxes", func(o *Options) { o.MaxSandboxes = -1 }, "--max-sandboxes"},
		{"negative network pool", func(o *Options) { o.NetworkPool = -1 }, "--network-pool"},
		{"bad subnet", func(o *Options) { o.Subnet = "10.0.0.0" }, "--subnet"},
		{"bad memory budget", func(o *Options) { o.MemoryBudget = "much" }, "memory-budget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), MaxBody: "1m", MaxUpload: "1g", MaxReply: "1g"}
			c.set(o)
			err := Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v; want an error naming %q", err, c.want)
			}
			if _, err := os.Stat(o.Root); !os.IsNotExist(err) {
				t.Fatalf("the refused settings left %s behind (%v)", o.Root, err)
			}
		})
	}
}
