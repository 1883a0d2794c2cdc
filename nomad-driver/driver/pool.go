package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/sbxrun/sbx"
)

// poolOptions turns a task's sandbox options into those of a claim from
// its pool. What a pool's members fix at start (its key, sbx.OptionClasses:
// image, network, seccomp, capabilities, user namespace, read-only root)
// is the pool's: the task may leave it unset or set it to the pool's
// value. Everything else is the task's and applied at the claim: name,
// labels, environment, working directory, user, limits, command, ports,
// egress, DNS, and Nomad's task directories, host volumes and tmpfs
// mounts.
func poolOptions(ctx context.Context, pools sbx.Pools, images sbx.Images, cfg *drivers.TaskConfig, tc *TaskConfig, task sbx.Options, img *sbx.Image) (sbx.Options, error) {
	p, err := pools.GetPool(ctx, tc.Pool)
	if err != nil {
		return task, fmt.Errorf("sbx: pool %q: %w (define it on the node with sbx pool create)", tc.Pool, err)
	}
	if p.Options.Rootfs != "" {
		return task, fmt.Errorf("sbx: pool %q runs a root directory, not an image: a task cannot claim from it", tc.Pool)
	}
	pimg, err := images.InspectImage(ctx, p.Options.Image)
	if err != nil {
		return task, fmt.Errorf("sbx: pool %q: its image %s: %w", tc.Pool, p.Options.Image, err)
	}
	if pimg.Digest != img.Digest {
		return task, fmt.Errorf("sbx: the task's image %s (%s) is not pool %q's image %s (%s)", img.Name, img.Digest, tc.Pool, pimg.Name, pimg.Digest)
	}
	if tc.networkOrNone() == sbx.NetworkNone {
		task.Network = "" // the default (HCL fills in "none"): the pool's
	}
	o, differ := sbx.ClaimOptions(&task, &p.Options)
	if len(differ) > 0 {
		return task, fmt.Errorf("sbx: the task's %s differ from pool %q's: a pool's members are started before the task exists, so the pool fixes %s (leave them unset or set the pool's values)",
			strings.Join(differ, ", "), tc.Pool, sbx.PoolKeyFieldNames())
	}
	o.Pull = sbx.PullNever
	o.Publish, o.DNS = nil, nil
	if o.Network == sbx.NetworkBridge {
		if o.Publish, err = publishPorts(cfg, tc.Ports); err != nil {
			return task, err
		}
		if cfg.DNS != nil {
			o.DNS = cfg.DNS.Servers
		}
	} else if len(tc.Ports) > 0 {
		return task, fmt.Errorf("sbx: ports need a bridge network, and pool %q's is %q", tc.Pool, o.Network)
	}
	return o, nil
}

// refillPool starts members of a pool until it is full again, after a
// task claimed one (the plugin does what `sbx serve` does for its pools).
func (d *Driver) refillPool(pools sbx.Pools, name string) {
	ctx, cancel := context.WithTimeout(d.ctx, startTimeout)
	defer cancel()
	start := time.Now()
	rep, err := pools.FillPool(ctx, name)
	if err != nil {
		d.logger.Warn("refill warm pool", "pool", name, "error", err)
		return
	}
	d.logger.Debug("refilled warm pool", "pool", name, "started", len(rep.Started), "took", time.Since(start))
}
