package openhands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
)

// DefaultImage is the Agent Server image Up starts when none is given: the
// pinned version sbx is tested with.
const DefaultImage = "ghcr.io/openhands/agent-server:1.58.0-python"

// DefaultCommand is the Agent Server's command, as the SDK sends it.
var DefaultCommand = []string{"/usr/local/bin/openhands-agent-server", "--port", strconv.Itoa(AgentServerPort)}

// UpFlags are sbx openhands up's settings in the text forms of its
// flags; Options checks and converts them.
type UpFlags struct {
	Settings
	Image, Name, Address, WorkingDir, User, KeyFile, Pull string
	Port, Warm                                            int
	Timeout                                               time.Duration
}

// Options checks f and makes the UpOptions of Up, reading the session key
// from KeyFile when one is named; log is Up's logger.
func (f *UpFlags) Options(log *slog.Logger) (UpOptions, error) {
	p, err := f.Parse("")
	if err != nil {
		return UpOptions{}, err
	}
	key := ""
	if f.KeyFile != "" {
		if key, err = server.ReadToken(f.KeyFile); err != nil {
			return UpOptions{}, fmt.Errorf("--key-file: %w", err)
		}
	}
	req := StartRequest{Image: f.Image, WorkingDir: f.WorkingDir, ImagePullPolicy: f.Pull}
	if err := req.ParseUser(f.User); err != nil {
		return UpOptions{}, err
	}
	return UpOptions{
		Request: req, Name: f.Name, Address: f.Address, Port: f.Port, Key: key,
		Aliases: p.Aliases, AgentTree: f.AgentTree, TreeImages: f.TreeImages, BaseLimits: p.BaseLimits,
		Egress: f.Egress, Environment: p.Environment, ReadyTimeout: f.Timeout, Logger: log, Warm: f.Warm,
	}, nil
}

// UpOptions say how Up starts one Agent Server for a client that talks to
// one Agent Server directly (Agent Canvas).
type UpOptions struct {
	// Request is what a POST /start would carry: Image (DefaultImage when
	// empty, through Aliases), Command (DefaultCommand when empty),
	// WorkingDir, Environment, RunAsUser/RunAsGroup, ImagePullPolicy.
	Request StartRequest
	// Name of the sandbox; empty: "openhands-" and a random suffix.
	Name string
	// Address is the host address the Agent Server's port is published on
	// (bridge network, DNAT) ["127.0.0.1"]; Port the host port [8000].
	Address string
	Port    int
	// Key is the session key clients send (X-Session-API-Key); empty: 32
	// random bytes.
	Key string
	// Aliases, AgentTree, TreeImages, BaseLimits, Egress and Environment
	// mean what they mean in Config.
	Aliases     []Alias
	AgentTree   string
	TreeImages  []string
	BaseLimits  sbx.Limits
	Egress      string
	Environment map[string]string
	// Warm, when positive, defines a warm pool of this many dormant Agent
	// Servers of this start's shape (if there is none), for later starts;
	// sbx serve on the same root fills it, or sbx pool fill. Up claims
	// from such a pool (or from sbx serve's warm shapes) whenever one has
	// a member ready.
	Warm int
	// WarmPools are the pools Up claims from and defines Warm's pool in
	// (the local host; nil: Up always starts cold and Warm must be 0).
	WarmPools WarmPools
	// ReadyTimeout bounds the pull and the start [10 min].
	ReadyTimeout time.Duration
	Logger       *slog.Logger
}

// UpResult is what a client needs to reach the Agent Server Up started.
type UpResult struct {
	SandboxID string `json:"sandbox_id"`
	Name      string `json:"name"`
	URL       string `json:"url"`
	Key       string `json:"session_api_key"`
}

// Up starts one Agent Server in a new sandbox with its port published on
// the host, and returns once it answers /alive. The sandbox outlives the
// caller (remove it with Remove, `sbx rm -f NAME`). On error nothing is
// left behind.
func Up(ctx context.Context, be Backend, o UpOptions) (*UpResult, error) {
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 8000
	}
	if o.Port < 1 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d is out of range (1-65535)", sbx.ErrInvalid, o.Port)
	}
	if ip := net.ParseIP(o.Address); ip == nil {
		return nil, fmt.Errorf("%w: address %q is not an IP address", sbx.ErrInvalid, o.Address)
	}
	if o.Warm < 0 || o.Warm > MaxWarmSize {
		return nil, fmt.Errorf("%w: warm %d: use 0 to %d dormant Agent Servers", sbx.ErrInvalid, o.Warm, MaxWarmSize)
	}
	if o.Warm > 0 && o.WarmPools == nil {
		return nil, fmt.Errorf("%w: a warm pool needs the local host's pools (UpOptions.WarmPools)", sbx.ErrInvalid)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	req := o.Request
	if req.Image == "" {
		req.Image = DefaultImage
	}
	if len(req.Command) == 0 {
		req.Command = DefaultCommand
	}
	if req.SessionID == "" {
		req.SessionID = "up"
	}
	s := &Service{be: be, log: o.Logger, ctx: ctx, cfg: Config{
		Aliases: o.Aliases, AgentTree: o.AgentTree, TreeImages: o.TreeImages, BaseLimits: o.BaseLimits,
		Network: sbx.NetworkBridge, Egress: o.Egress, Environment: o.Environment,
	}}
	name := o.Name
	if name == "" {
		name = "openhands-" + newID(4)
	}
	key := o.Key
	if key == "" {
		key = newID(32)
	}
	rt := &runtime{RuntimeID: name, SessionID: req.SessionID, Key: key}

	ctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	image, tree := s.resolveImage(req.Image)
	img, err := s.ensureImage(ctx, image, req.ImagePullPolicy)
	if err != nil {
		return nil, err
	}
	opts, spec, err := s.sandboxOptions(rt, req, img, tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	opts.Publish = []string{net.JoinHostPort(o.Address, strconv.Itoa(o.Port)) + ":" + strconv.Itoa(AgentServerPort)}
	opts.Labels["sbx.openhands/up"] = "1"
	if o.WarmPools != nil && !tree {
		if res := upWarm(ctx, s, o.WarmPools, &o, req, opts); res != nil {
			return res, nil
		}
	}
	sb, err := be.Create(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("create the Agent Server's sandbox: %w", err)
	}
	fail := func(err error) (*UpResult, error) {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		if rerr := be.Remove(rctx, sb.ID, sbx.RemoveOptions{Force: true}); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the sandbox %s: %w", sb.ID, rerr))
		}
		return nil, err
	}
	ex := s.executor(sb.ID)
	defer ex.Close()
	if _, err := ex.StartMainCmd(ctx, spec); err != nil {
		return fail(fmt.Errorf("start the Agent Server: %w", err))
	}
	exited, err := s.waitAlive(ctx, sb.ID, ex)
	if exited != nil {
		s.cfg.LogTailBytes = 4 << 10
		return fail(fmt.Errorf("%s; its last output:\n%s", exitDetail(*exited), s.logTail(context.Background(), ex)))
	}
	if err != nil {
		return fail(fmt.Errorf("the Agent Server did not answer /alive: %w", err))
	}
	return &UpResult{SandboxID: sb.ID, Name: name, Key: key, URL: upURL(&o)}, nil
}

// upURL is where Up's Agent Server is reached.
func upURL(o *UpOptions) string {
	host := o.Address
	if ip := net.ParseIP(host); ip.IsUnspecified() {
		host = "127.0.0.1" // published on every address, loopback included
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(o.Port))
}

// upWarm defines the warm pool o.Warm asks for, and claims a dormant
// Agent Server of the start's shape with cold's options (its name,
// labels and published port), handing it the session; nil when none was
// had (Up then starts one cold).
func upWarm(ctx context.Context, s *Service, wb WarmPools, o *UpOptions, req StartRequest, cold sbx.Options) *UpResult {
	w := &warm{be: wb, prefix: warmPrefix}
	sh, err := w.shapeOf(s, req, true)
	if err != nil {
		return nil
	}
	if o.Warm > 0 {
		spec := sh.spec
		spec.Size = o.Warm
		if _, err := wb.CreatePool(ctx, spec); err != nil && !errors.Is(err, sbx.ErrNameInUse) {
			s.log.Warn("openhands up: define the warm pool", "err", err)
		}
	}
	opts := sh.spec.Options
	opts.Name, opts.Labels, opts.Publish = cold.Name, cold.Labels, cold.Publish
	key := o.Key
	sb, err := wb.Claim(ctx, opts, func(ctx context.Context, m *sandbox.PoolMember) error {
		if key == "" {
			key = m.Key
		}
		return s.initAgentServer(ctx, m.Sandbox.ID, sh.initKey(m.Key), key, sh.initEnv(req))
	})
	if err != nil {
		s.log.Debug("openhands up: no warm Agent Server", "why", err)
		return nil
	}
	return &UpResult{SandboxID: sb.ID, Name: cold.Name, Key: key, URL: upURL(o)}
}
