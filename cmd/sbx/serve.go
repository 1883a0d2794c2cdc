package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/server/serve"
)

func serveCmd(a *app) *cobra.Command {
	o := &serve.Options{}
	var oh openhandsFlags
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
			o.Root, o.RunRoot, o.OpenHands = a.root, a.runRoot, oh.ServeOptions
			if err := serve.Run(cmd.Context(), o); err != nil {
				return exitErr("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "", "TCP address to listen on, e.g. 127.0.0.1:7070")
	f.StringVar(&o.Unix, "unix", "", "unix socket to listen on (default <run-root>/sbx.sock without --listen)")
	f.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token clients must send")
	f.StringVar(&o.TLSCert, "tls-cert", "", "TLS certificate (PEM) for the TCP listener")
	f.StringVar(&o.TLSKey, "tls-key", "", "TLS private key (PEM) for the TCP listener")
	f.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "allow a TCP listener without a token (anyone who reaches it controls sandboxes)")
	f.IntVar(&o.MaxSandboxes, "max-sandboxes", 0, "maximum number of sandboxes (0: no limit)")
	f.StringVar(&o.MemoryBudget, "memory-budget", "", "maximum sum of the sandboxes' memory limits, e.g. 64g")
	f.IntVar(&o.MaxConcurrentCreates, "max-concurrent-creates", 16, "creates in flight at once; more get HTTP 429")
	f.StringVar(&o.MaxBody, "max-body-size", "1m", "maximum JSON request body")
	f.StringVar(&o.MaxUpload, "max-upload-size", "1g", "maximum file or archive upload to a sandbox, and image archive upload (sbx import)")
	f.StringVar(&o.MaxReply, "max-reply-size", "1g", "maximum reply taken from a sandbox's executor")
	f.DurationVar(&o.ProxyTimeout, "proxy-timeout", time.Hour, "deadline of one call to a sandbox's executor")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	f.DurationVar(&o.WatchInterval, "watch-interval", time.Second, "how often to look for changes made elsewhere and expired TTLs")
	f.StringArrayVar(&o.AllowHostDirs, "allow-host-dir", nil, "host directory under which creates may name a rootfs or volumes (repeatable)")
	f.BoolVar(&o.AllowHostNetwork, "allow-host-network", false, "let creates ask for the host's network")
	f.BoolVar(&o.AllowPrivileged, "allow-privileged", false, "let creates add capabilities or choose another seccomp profile")
	f.StringArrayVar(&o.InsecureRegistries, "insecure-registry", nil, "registry host[:port] to pull from over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	f.IntVar(&o.NetworkPool, "network-pool", 0, "prepared bridged network namespaces to keep waiting (filled in the background, drained at exit)")
	f.StringVar(&o.Subnet, "subnet", os.Getenv("SBX_SUBNET"), "IPv4 subnet of the bridge, e.g. 10.77.0.0/16 (default $SBX_SUBNET, else 10.88.0.0/16 or the next free /16)")
	f.StringVar(&o.ExecutorBinary, "executor-binary", "", "static executor binary the sandboxes run as \"BINARY executor\": sbx-executor or sbx (default: the sbx-executor embedded in sbx)")
	_ = f.MarkHidden("executor-binary")
	oh.registerServe(f)
	return cmd
}
