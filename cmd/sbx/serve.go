package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
)

type serveOptions struct {
	listen, unix                  string
	tokenFile                     string
	tlsCert, tlsKey               string
	insecureNoAuth                bool
	maxSandboxes                  int
	memoryBudget                  string
	maxCreates                    int
	maxBody, maxUpload, maxReply  string
	proxyTimeout, shutdownTimeout time.Duration
	watchInterval                 time.Duration
	allowHostDirs                 []string
	allowHostNetwork, allowPriv   bool
	executorBinary                string
	insecureRegistries            []string
	networkPool                   int
	subnet                        string
	openhands                     openhandsFlags
}

func serveCmd(a *app) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--unix PATH] [--token-file F] [--tls-cert F --tls-key F]",
		Short: "Serve the REST API for remote and cluster use",
		Long: `Serve sbx's REST API (see docs/server.md and GET /v1/openapi.yaml).

Without --listen the server listens only on a unix socket (--unix, default
<run-root>/sbx.sock, mode 0600). A TCP listener refuses to start without a
token (--token-file) unless --insecure-no-auth is given. With a token, every
route but /healthz needs "Authorization: Bearer <token>" on every listener.

At start the server re-adopts the sandboxes a previous server (or the CLI)
left running; SIGTERM or SIGINT stop it gracefully and leave sandboxes
running.

With --openhands-listen (and/or --openhands-port-listen) it also serves the
OpenHands Remote Runtime API (docs/openhands.md), with its own key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.host != "" {
				return exitErr("sbx serve acts on this host only and does not take --host (or SBX_HOST)")
			}
			if err := runServe(cmd.Context(), a, o); err != nil {
				return exitErr("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "", "TCP address to listen on, e.g. 127.0.0.1:7070")
	f.StringVar(&o.unix, "unix", "", "unix socket to listen on (default <run-root>/sbx.sock without --listen)")
	f.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token clients must send")
	f.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate (PEM) for the TCP listener")
	f.StringVar(&o.tlsKey, "tls-key", "", "TLS private key (PEM) for the TCP listener")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "allow a TCP listener without a token (anyone who reaches it controls sandboxes)")
	f.IntVar(&o.maxSandboxes, "max-sandboxes", 0, "maximum number of sandboxes (0: no limit)")
	f.StringVar(&o.memoryBudget, "memory-budget", "", "maximum sum of the sandboxes' memory limits, e.g. 64g")
	f.IntVar(&o.maxCreates, "max-concurrent-creates", 16, "creates in flight at once; more get HTTP 429")
	f.StringVar(&o.maxBody, "max-body-size", "1m", "maximum JSON request body")
	f.StringVar(&o.maxUpload, "max-upload-size", "1g", "maximum file or archive upload to a sandbox, and image archive upload (sbx import)")
	f.StringVar(&o.maxReply, "max-reply-size", "1g", "maximum reply taken from a sandbox's executor")
	f.DurationVar(&o.proxyTimeout, "proxy-timeout", time.Hour, "deadline of one call to a sandbox's executor")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	f.DurationVar(&o.watchInterval, "watch-interval", time.Second, "how often to look for changes made elsewhere and expired TTLs")
	f.StringArrayVar(&o.allowHostDirs, "allow-host-dir", nil, "host directory under which creates may name a rootfs or volumes (repeatable)")
	f.BoolVar(&o.allowHostNetwork, "allow-host-network", false, "let creates ask for the host's network")
	f.BoolVar(&o.allowPriv, "allow-privileged", false, "let creates add capabilities or choose another seccomp profile")
	f.StringArrayVar(&o.insecureRegistries, "insecure-registry", nil, "registry host[:port] to pull from over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	f.IntVar(&o.networkPool, "network-pool", 0, "prepared bridged network namespaces to keep waiting (filled in the background, drained at exit)")
	f.StringVar(&o.subnet, "subnet", os.Getenv("SBX_SUBNET"), "IPv4 subnet of the bridge, e.g. 10.77.0.0/16 (default $SBX_SUBNET, else 10.88.0.0/16 or the next free /16)")
	f.StringVar(&o.executorBinary, "executor-binary", "", "static executor binary the sandboxes run as \"BINARY executor\": sbx-executor or sbx (default: the sbx-executor embedded in sbx)")
	_ = f.MarkHidden("executor-binary")
	o.openhands.registerServe(f)
	return cmd
}

func runServe(ctx context.Context, a *app, o *serveOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log := slog.Default()
	lc := server.ListenConfig{TCP: o.listen, Unix: o.unix, DefaultUnix: filepath.Join(a.runRoot, "sbx.sock"),
		TLSCert: o.tlsCert, TLSKey: o.tlsKey, InsecureNoAuth: o.insecureNoAuth}
	if o.tokenFile != "" {
		var err error
		if lc.Token, err = server.ReadToken(o.tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	if err := lc.Check(); err != nil {
		return err
	}
	scfg := server.Config{Token: lc.Token, ProxyTimeout: o.proxyTimeout, MaxConcurrentCreates: o.maxCreates, Logger: log}
	if err := scfg.ParseSizes(o.maxBody, o.maxUpload, o.maxReply); err != nil {
		return err
	}
	if o.maxSandboxes < 0 {
		return fmt.Errorf("invalid --max-sandboxes %d", o.maxSandboxes)
	}
	if o.networkPool < 0 {
		return fmt.Errorf("invalid --network-pool %d: want a count", o.networkPool)
	}
	hcfg := sandbox.HostConfig{
		Root: a.root, RunRoot: a.runRoot, MaxSandboxes: o.maxSandboxes, NetworkPool: o.networkPool,
		WatchInterval: o.watchInterval, Executor: o.executorBinary, InsecureRegistries: o.insecureRegistries, Logger: log,
		// Requests are held to the flags' policy; the host itself (this
		// process) is trusted.
		Policy: &sbx.Policy{AllowedHostDirs: o.allowHostDirs, AllowHostNetwork: o.allowHostNetwork, AllowPrivileged: o.allowPriv},
	}
	if o.subnet != "" {
		subnet, err := sandbox.ParseSubnet("--subnet", o.subnet)
		if err != nil {
			return err
		}
		hcfg.Subnet = subnet
	}
	if o.memoryBudget != "" {
		n, err := dockerargs.ParseSize("memory-budget", o.memoryBudget)
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
	ohs, err := startOpenHands(&o.openhands, host, a.root, lc.Token, log)
	if err != nil {
		return err
	}
	served := false // once served, each Listener closes itself
	defer func() {
		if !served {
			ohs.Close()
		}
	}()
	scfg.Backend = host
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
			fmt.Fprintf(os.Stderr, "sbx serve: listening on %s\n", server.URL(ln, o.tlsCert != ""))
		}
	}
	// The Runtime API's listeners stop with the REST API's, at the same
	// deadline (its data plane holds WebSockets for hours).
	served = true
	return srv.ServeWith(ctx, listeners, o.shutdownTimeout, ohs.Companions()...)
}
