// Package serve runs sbx serve: it opens this host with the server's limits
// and policy, re-adopts its sandboxes, and serves the REST API (and the
// OpenHands Runtime API when asked) until its context ends or SIGINT or
// SIGTERM arrives.
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/openhands"
)

// Options are sbx serve's settings, one field per flag.
type Options struct {
	// Root and RunRoot are the host's state directories.
	Root, RunRoot string
	// Listen is a TCP address; Unix a socket path (default RunRoot/sbx.sock
	// without Listen).
	Listen, Unix string
	// TokenFile holds the bearer token; TLSCert and TLSKey serve TCP over TLS.
	TokenFile, TLSCert, TLSKey string
	// InsecureNoAuth allows a TCP listener without a token.
	InsecureNoAuth bool
	// MaxSandboxes caps the sandboxes (0: no limit); MemoryBudget caps the
	// sum of their memory limits ("64g"; "": none).
	MaxSandboxes int
	MemoryBudget string
	// MaxConcurrentCreates is how many creates run at once; more get 429.
	MaxConcurrentCreates int
	// MaxBody, MaxUpload and MaxReply are sizes in docker's forms ("1m").
	MaxBody, MaxUpload, MaxReply string
	// ProxyTimeout bounds one call to an executor; ShutdownTimeout is how
	// long a stop waits for requests in flight; WatchInterval how often the
	// host looks for changes made elsewhere.
	ProxyTimeout, ShutdownTimeout, WatchInterval time.Duration
	// AllowHostDirs, AllowHostNetwork and AllowPrivileged are the policy
	// of creates (sbx.Policy).
	AllowHostDirs                     []string
	AllowHostNetwork, AllowPrivileged bool
	// ExecutorBinary overrides the executor the sandboxes run.
	ExecutorBinary string
	// InsecureRegistries are pulled from over plain HTTP.
	InsecureRegistries []string
	// NetworkPool is how many prepared bridged namespaces wait; Subnet the
	// bridge's IPv4 subnet ("": the default).
	NetworkPool int
	Subnet      string
	// OpenHands serves the OpenHands Runtime API when it names a listener.
	OpenHands openhands.ServeOptions
}

// Run checks o, opens the host and serves until ctx ends or SIGINT or
// SIGTERM arrives; sandboxes keep running after it returns.
func Run(ctx context.Context, o *Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log := slog.Default()
	lc := server.ListenConfig{TCP: o.Listen, Unix: o.Unix, DefaultUnix: filepath.Join(o.RunRoot, "sbx.sock"),
		TLSCert: o.TLSCert, TLSKey: o.TLSKey, InsecureNoAuth: o.InsecureNoAuth}
	if o.TokenFile != "" {
		var err error
		if lc.Token, err = server.ReadToken(o.TokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	if err := lc.Check(); err != nil {
		return err
	}
	scfg := server.Config{Token: lc.Token, ProxyTimeout: o.ProxyTimeout, MaxConcurrentCreates: o.MaxConcurrentCreates, Logger: log}
	if err := scfg.ParseSizes(o.MaxBody, o.MaxUpload, o.MaxReply); err != nil {
		return err
	}
	if o.MaxSandboxes < 0 {
		return fmt.Errorf("invalid --max-sandboxes %d", o.MaxSandboxes)
	}
	if o.NetworkPool < 0 {
		return fmt.Errorf("invalid --network-pool %d: want a count", o.NetworkPool)
	}
	hcfg := sandbox.HostConfig{
		Root: o.Root, RunRoot: o.RunRoot, MaxSandboxes: o.MaxSandboxes, NetworkPool: o.NetworkPool,
		WatchInterval: o.WatchInterval, Executor: o.ExecutorBinary, InsecureRegistries: o.InsecureRegistries, Logger: log,
		// Requests are held to the flags' policy; the host itself (this
		// process) is trusted.
		Policy: &sbx.Policy{AllowedHostDirs: o.AllowHostDirs, AllowHostNetwork: o.AllowHostNetwork, AllowPrivileged: o.AllowPrivileged},
	}
	if o.Subnet != "" {
		subnet, err := sandbox.ParseSubnet("--subnet", o.Subnet)
		if err != nil {
			return err
		}
		hcfg.Subnet = subnet
	}
	if o.MemoryBudget != "" {
		n, err := dockerargs.ParseSize("memory-budget", o.MemoryBudget)
		if err != nil {
			return err
		}
		hcfg.MemoryBudget = n
	}
	if err := hcfg.ReadEnv(); err != nil {
		return err
	}
	host, err := sandbox.Open(hcfg)
	if err != nil {
		return err
	}
	defer host.Close()
	ohs, err := startOpenHands(&o.OpenHands, host, o.Root, lc.Token, log)
	if err != nil {
		return err
	}
	served := false // once served, each Listener closes itself
	defer func() {
		if !served {
			ohs.Close()
		}
	}()
	scfg.Backend, scfg.Background = host, host
	srv, err := server.New(scfg)
	if err != nil {
		return err
	}
	listeners, closeListeners, err := lc.Listen()
	if err != nil {
		return err
	}
	defer closeListeners()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		return err
	}
	for _, ln := range listeners {
		log.Info("sbx serve: listening", "addr", ln.Addr().String())
		if !log.Enabled(ctx, slog.LevelInfo) {
			// Said at any log level: where to connect is what a user
			// starting a server needs first.
			fmt.Fprintf(os.Stderr, "sbx serve: listening on %s\n", server.URL(ln, o.TLSCert != ""))
		}
	}
	// The Runtime API's listeners stop with the REST API's, at the same
	// deadline (its data plane holds WebSockets for hours).
	served = true
	return srv.ServeWith(ctx, listeners, o.ShutdownTimeout, ohs.Companions()...)
}

// startOpenHands opens the Runtime API listeners the flags ask for over
// host, held to the API's policy (Settings.Policy); the caller serves
// them (Listener.Serve); the data plane strips token (the REST server's).
func startOpenHands(f *openhands.ServeOptions, host *sandbox.Host, root, token string, log *slog.Logger) (openhands.Listeners, error) {
	f.StateRoot, f.Logger, f.ServerToken = filepath.Join(root, "openhands"), log, token
	cfg, err := f.Config()
	if err != nil || !f.Enabled() {
		return nil, err
	}
	be, err := host.WithPolicy(f.Policy())
	if err != nil {
		return nil, err
	}
	cfg.WarmPools = be // warm Agent Servers are pools of the same host
	return openhands.ListenAll(be, cfg, f)
}

// The host is the server's backend and its background work.
var (
	_ server.Backend    = (*sandbox.Host)(nil)
	_ server.Background = (*sandbox.Host)(nil)
)
