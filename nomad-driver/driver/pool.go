package driver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/sbxrun/sbx"
)

// poolOptions turns a task's sandbox options into those of a claim from
// its pool: what a sandbox fixes at start (image, user, network, mounts,
// seccomp, capabilities) is the pool's, and the task brings what a claim
// applies (name, labels, environment, working directory, limits, command,
// published ports). Nomad's task directories are not mounted: the pool's
// members were started before the task existed.
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
	if cfg.User != "" && cfg.User != p.Options.User {
		return task, fmt.Errorf("sbx: the task's user %q is not pool %q's user %q (a pool fixes the user)", cfg.User, tc.Pool, p.Options.User)
	}
	o := p.Options
	o.Volumes = slices.Clone(o.Volumes)
	o.Tmpfs = slices.Clone(o.Tmpfs)
	o.Name, o.Labels, o.Env, o.Workdir, o.Limits, o.Cmd = task.Name, task.Labels, task.Env, task.Workdir, task.Limits, task.Cmd
	o.Pull = sbx.PullNever
	if len(tc.Ports) > 0 {
		if o.Network != sbx.NetworkBridge {
			return task, fmt.Errorf("sbx: ports need a bridge network, and pool %q's is %q", tc.Pool, o.Network)
		}
		if o.Publish, err = publishPorts(cfg, tc.Ports); err != nil {
			return task, err
		}
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
