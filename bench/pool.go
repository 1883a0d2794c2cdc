package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/client"
)

// Phases of a claim from a warm pool.
const (
	PhaseResolve = "resolve the image, check the options"
	PhaseClaim   = "claim: lock an idle member, apply limits/env, record"
	PhaseProcess = "sbx process: exec, Go start, flags, output, exit"
	PhaseHTTP    = "HTTP: client, server, JSON"
)

// Figures of the pool scenario.
const (
	// FigureCLIClaimP50 is the claim inside `sbx create` (its
	// create_timings.total_s), p50 in ms: the CLI's process start aside.
	FigureCLIClaimP50 = "cli claim p50 ms"
)

// poolName is the bench's warm pool.
const poolName = "bench"

// poolSize is how many members the bench's pool keeps; each sample
// claims one and the subject refills it before the next (not timed).
const poolSize = 3

// PoolScenario measures a create that claims a member of a warm pool,
// until it returns (its executor answered when the member started),
// through the library, the daemonless CLI and the REST server, against
// a cold create in the same rounds (and runc run -d with anchors).
func PoolScenario(w Workload, c Compare) *Scenario {
	shared := &poolEnv{w: w}
	sc := &Scenario{
		Name:        "pool",
		Description: "create that claims a member of a warm pool (pool of " + fmt.Sprint(poolSize) + ", refilled between samples, untimed), until it returns; cold = a create with no pool",
		Unit:        "ms",
		Subjects: []Subject{
			&sbxPoolClaim{env: shared, via: "lib"},
			&sbxPoolClaim{env: shared, via: "server"},
			&sbxPoolClaim{env: shared, via: "cli"},
			&sbxReady{w: w, name: "sbx cold"},
		},
	}
	for _, name := range c.Runtimes {
		sc.Subjects = append(sc.Subjects, newDetached(name, w, c, "ready"))
	}
	return sc
}

// poolEnv is the one host (state directories) the pool subjects share,
// with its pool, and a server over it on a unix socket.
type poolEnv struct {
	w    Workload
	refs int
	env  *hostEnv
	srv  *server.Server
	hs   *http.Server
	c    *client.Client
	sock string
}

func (p *poolEnv) open(ctx context.Context) error {
	p.refs++
	if p.env != nil {
		return nil
	}
	env, err := newHostEnv(p.w)
	if err != nil {
		return err
	}
	p.env = env
	if env.w.Image != "" && env.w.imageStore != nil {
		// The CLI finds the images under its --root.
		if err := os.Symlink(env.w.imageStore.Root(), filepath.Join(env.root, "images")); err != nil {
			return err
		}
	}
	opts := env.options()
	opts.Pull = ""
	if _, err := env.h.CreatePool(ctx, sbx.PoolSpec{Name: poolName, Size: poolSize, Options: opts}); err != nil {
		return fmt.Errorf("define the warm pool: %w", err)
	}
	if _, err := env.h.FillPool(ctx, poolName); err != nil {
		return fmt.Errorf("fill the warm pool: %w", err)
	}
	if p.srv, err = server.New(server.Config{Backend: env.h, Background: env.h}); err != nil {
		return err
	}
	p.sock = filepath.Join(env.root, "sbx.sock")
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		return err
	}
	p.hs = &http.Server{Handler: p.srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.hs.Serve(ln) }()
	p.c, err = client.New("unix://"+p.sock, client.Options{})
	return err
}

func (p *poolEnv) close() error {
	p.refs--
	if p.refs > 0 || p.env == nil {
		return nil
	}
	var errs []error
	if p.hs != nil {
		errs = append(errs, p.hs.Close())
		p.srv.Close()
	}
	if p.c != nil {
		p.c.Close()
	}
	_, err := p.env.h.RemovePool(context.Background(), poolName)
	errs = append(errs, err, p.env.close())
	p.env = nil
	return errors.Join(errs...)
}

// sbxPoolClaim claims from the shared pool through the library, the REST
// server or a fresh sbx CLI process.
type sbxPoolClaim struct {
	env    *poolEnv
	via    string    // lib, server or cli
	claims []float64 // cli: the claim inside each process, ms
}

func (s *sbxPoolClaim) Name() string {
	if s.via == "lib" {
		return "sbx"
	}
	return "sbx " + s.via
}

func (s *sbxPoolClaim) Setup(ctx context.Context) (Info, error) {
	info := Info{Version: SbxVersion()}
	switch s.via {
	case "lib":
		info.Command = "sandbox.Host.Create matching the pool's options (in-process)"
	case "server":
		info.Command = "client.Create (POST /v1/sandboxes) to an in-process sbx server on a unix socket"
	case "cli":
		info.Command = "sbx create --pull never (IMAGE | --rootfs DIR) as a fresh process on the pool's --root"
		if err := CheckStatic(s.env.w.SbxBin); err != nil {
			return info, err
		}
	}
	return info, s.env.open(ctx)
}

func (s *sbxPoolClaim) Once(ctx context.Context) (Sample, error) {
	env := s.env.env
	t0 := time.Now()
	var sb *sbx.Sandbox
	var err error
	var extra Phase
	switch s.via {
	case "lib":
		sb, err = env.h.Create(ctx, env.options())
	case "server":
		sb, err = s.env.c.Create(ctx, env.options())
	case "cli":
		sb, err = s.cliCreate(ctx)
	}
	d := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	if sb.FromPool != poolName || sb.CreateTimings == nil {
		_ = env.h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
		return Sample{}, fmt.Errorf("the create did not claim a member of the pool (from_pool %q): a cold start", sb.FromPool)
	}
	claim := sb.CreateTimings.TotalS * 1000
	resolve := max(claim-sb.CreateTimings.ClaimS*1000, 0)
	switch s.via {
	case "server":
		extra = Phase{PhaseHTTP, max(Ms(d)-claim, 0)}
	case "cli":
		extra = Phase{PhaseProcess, max(Ms(d)-claim, 0)}
	}
	phases := []Phase{{PhaseResolve, resolve}, {PhaseClaim, claim - resolve}}
	if extra.Name != "" {
		phases = append(phases, extra)
	}
	if err := env.h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		return Sample{}, fmt.Errorf("remove: %w", err)
	}
	if _, err := env.h.FillPool(ctx, poolName); err != nil {
		return Sample{}, fmt.Errorf("refill the pool: %w", err)
	}
	return Sample{Value: Ms(d), Phases: phases}, nil
}

// cliCreate runs `sbx create` on the pool's root and reads the record of
// the sandbox it printed.
func (s *sbxPoolClaim) cliCreate(ctx context.Context) (*sbx.Sandbox, error) {
	env := s.env.env
	args := []string{"--root", env.root, "--run-root", env.runRoot, "create", "--userns", "host", "--pull", "never"}
	if o := env.options(); o.Image != "" {
		args = append(args, o.Image)
	} else {
		args = append(args, "--rootfs", o.Rootfs)
	}
	out, err := runCmd(ctx, 30*time.Second, env.w.SbxBin, args...)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(out)
	sb, err := env.h.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sbx create printed %q: %w", id, err)
	}
	s.claims = append(s.claims, sb.CreateTimings.TotalS*1000)
	return sb, nil
}

// Figures is the p50 of the claims inside the CLI processes.
func (s *sbxPoolClaim) Figures() map[string]float64 {
	if s.via != "cli" || len(s.claims) == 0 {
		return nil
	}
	sum := Summarize(s.claims)
	return map[string]float64{FigureCLIClaimP50: sum.P50}
}

func (s *sbxPoolClaim) Close() error { return s.env.close() }
