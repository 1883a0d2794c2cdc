package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

// claimPools are the claim scenario's warm pools, by user-namespace
// mode (the mode is part of a pool's key).
var claimPools = map[string]string{sbx.UserNSHost: "bench-claim", sbx.UserNSPrivate: "bench-claim-private"}

// ClaimScenario measures, in-process, a create that claims a member of a
// bridged warm pool and personalises it (environment, a volume, a
// hostname, an egress allow-list, limits and a published port, all
// applied to the running member), against a plain claim (a name only)
// from the same pool in the same rounds, in the host's user namespace;
// and the personalised claim from a pool of members with private user
// namespaces. The bridge lives in a network namespace of the bench's own,
// never on the host's interfaces.
func ClaimScenario(w Workload) *Scenario {
	shared := &claimEnv{w: w}
	return &Scenario{
		Name:        "claim",
		Description: "create that claims a member of a bridged warm pool (pool of " + fmt.Sprint(poolSize) + ", refilled between samples, untimed), in-process; personalised = env, a volume, a hostname, an egress allow-list, limits and a published port applied at the claim; members in the host's user namespace unless the subject says private",
		Unit:        "ms",
		Subjects: []Subject{&sbxClaim{env: shared, personal: true, userns: sbx.UserNSHost}, &sbxClaim{env: shared, userns: sbx.UserNSHost},
			&sbxClaim{env: shared, personal: true, userns: sbx.UserNSPrivate}},
	}
}

// claimEnv is the host, network namespace and pool the claim subjects
// share.
type claimEnv struct {
	w      Workload
	refs   int
	env    *hostEnv
	netns  string
	volume string
}

func (c *claimEnv) open(ctx context.Context) error {
	c.refs++
	if c.env != nil {
		return nil
	}
	c.netns = fmt.Sprintf("sbx-bench-claim-%d", os.Getpid())
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", c.netns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", c.netns, err, out)
	}
	if out, err := exec.CommandContext(ctx, "ip", "-n", c.netns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fmt.Errorf("loopback up in %s: %w: %s", c.netns, err, out)
	}
	env, err := newHostEnvWith(c.w, func(cfg *sandbox.HostConfig) { cfg.HostNetNS = "/run/netns/" + c.netns })
	if err != nil {
		return err
	}
	c.env = env
	if c.volume, err = os.MkdirTemp("", "sbx-bench-volume-"); err != nil {
		return err
	}
	for mode, pool := range claimPools {
		opts := env.options()
		opts.Pull, opts.Network, opts.UserNS = "", sbx.NetworkBridge, mode
		if _, err := env.h.CreatePool(ctx, sbx.PoolSpec{Name: pool, Size: poolSize, Options: opts}); err != nil {
			return fmt.Errorf("define the warm pool: %w", err)
		}
		if _, err := env.h.FillPool(ctx, pool); err != nil {
			return fmt.Errorf("fill the warm pool: %w", err)
		}
	}
	return nil
}

func (c *claimEnv) close() error {
	c.refs--
	if c.refs > 0 || c.env == nil {
		return nil
	}
	var errs []error
	for _, pool := range claimPools {
		_, err := c.env.h.RemovePool(context.Background(), pool)
		errs = append(errs, err)
	}
	errs = append(errs, c.env.close(), os.RemoveAll(c.volume))
	if out, err := exec.Command("ip", "netns", "delete", c.netns).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("ip netns delete %s: %w: %s", c.netns, err, out))
	}
	c.env = nil
	return errors.Join(errs...)
}

// options are a claim's options in user-namespace mode userns:
// personalised, or with a name only.
func (c *claimEnv) options(personal bool, userns string, n int) sbx.Options {
	o := c.env.options()
	o.Network, o.UserNS = sbx.NetworkBridge, userns
	o.Name = fmt.Sprintf("claim-%d", n)
	if personal {
		o.Env = []string{"TASK=" + fmt.Sprint(n), "MODE=bench"}
		o.Volumes = []sbx.Volume{{HostPath: c.volume, Path: "/data", ReadOnly: true}}
		o.Hostname = fmt.Sprintf("job-%d", n)
		o.Egress = "192.0.2.0/24"
		o.Limits = sbx.Limits{MemoryBytes: 128 << 20, CPUs: 0.5, Pids: 64}
		o.Publish = []string{"127.0.0.1:0:8080"}
	}
	return o
}

// sbxClaim claims from the shared bridged pool of its user-namespace
// mode, personalised or not.
type sbxClaim struct {
	env      *claimEnv
	personal bool
	userns   string
	n        int
}

func (s *sbxClaim) Name() string {
	name := "sbx plain claim"
	if s.personal {
		name = "sbx personalised"
	}
	if s.userns == sbx.UserNSPrivate {
		name += ", private userns"
	}
	return name
}

func (s *sbxClaim) Setup(ctx context.Context) (Info, error) {
	info := Info{Version: SbxVersion(), Command: "sandbox.Host.Create claiming from a bridged pool (in-process, --userns " + s.userns + "), with a name only"}
	if s.personal {
		info.Command = "sandbox.Host.Create claiming from a bridged pool (in-process, --userns " + s.userns + ") with -e x2, -v DIR:/data:ro, --hostname, --egress CIDR, --memory/--cpus/--pids-limit, -p 127.0.0.1:0:8080"
	}
	return info, s.env.open(ctx)
}

func (s *sbxClaim) Once(ctx context.Context) (Sample, error) {
	env := s.env.env
	s.n++
	t0 := time.Now()
	sb, err := env.h.Create(ctx, s.env.options(s.personal, s.userns, s.n))
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	var errs []error
	pool := claimPools[s.userns]
	if sb.FromPool != pool || sb.CreateTimings == nil {
		errs = append(errs, fmt.Errorf("the create did not claim a member of the pool (%v): a cold start", sb.CreateTimings))
	}
	errs = append(errs, env.h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}))
	if _, err := env.h.FillPool(ctx, pool); err != nil {
		errs = append(errs, fmt.Errorf("refill the pool: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return Sample{}, err
	}
	claim := sb.CreateTimings.TotalS * 1000
	resolve := max(claim-sb.CreateTimings.ClaimS*1000, 0)
	return Sample{Value: Ms(d), Phases: []Phase{{PhaseResolve, resolve}, {PhaseClaim, claim - resolve}}}, nil
}

func (s *sbxClaim) Close() error { return s.env.close() }
