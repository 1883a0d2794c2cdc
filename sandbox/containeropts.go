package sandbox

import (
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/netns"
)

// ociRlimits turns the options' ulimits into OCI rlimits (-1: infinity).
func ociRlimits(us []sbx.Ulimit) []specs.POSIXRlimit {
	var out []specs.POSIXRlimit
	val := func(v int64) uint64 {
		if v < 0 {
			return ^uint64(0)
		}
		return uint64(v)
	}
	for _, u := range us {
		out = append(out, specs.POSIXRlimit{Type: "RLIMIT_" + strings.ToUpper(u.Name), Soft: val(u.Soft), Hard: val(u.Hard)})
	}
	return out
}

// publishExposed adds to o.Publish, when o.PublishAll is set, a free host
// port for each port the image's config exposes ("80/tcp") that no
// Publish entry maps yet, as docker run -P does. It is idempotent: a
// sandbox started again from its record publishes the same entries.
func publishExposed(o *sbx.Options, cfg *sbx.ImageConfig) {
	if !o.PublishAll || cfg == nil {
		return
	}
	mapped := map[string]bool{} // "80/tcp"
	ctr := func(m netns.PortMapping) string { return fmt.Sprintf("%d/%s", m.ContainerPort, m.Proto) }
	for _, p := range o.Publish {
		if m, err := netns.ParsePublish(p); err == nil {
			mapped[ctr(m)] = true
		}
	}
	for _, e := range cfg.ExposedPorts {
		m, err := netns.ParsePublish("0:" + e)
		if err != nil {
			continue // a hostile or odd config: not published
		}
		if key := ctr(m); !mapped[key] {
			mapped[key] = true
			o.Publish = append(o.Publish, m.String())
		}
	}
}
