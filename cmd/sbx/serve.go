package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/server/serve"
)

func serveCmd(a *app) *cobra.Command {
	o := &serve.Options{}
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
			o.Root, o.RunRoot = a.root, a.runRoot
			if err := serve.Run(cmd.Context(), o); err != nil {
				return exitErr("%v", err)
			}
			return nil
		},
	}
	o.Register(cmd.Flags())
	return cmd
}
