package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/openhands"
)

// openhandsCmd is sbx openhands: OpenHands' helpers.
func openhandsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "openhands",
		Short: "Run OpenHands Agent Servers in sandboxes (see docs/openhands.md)",
		Long: `OpenHands runs its agents in an Agent Server. sbx serve --openhands-listen
serves the Remote Runtime API that OpenHands' SDK and app server use; sbx
openhands up starts one Agent Server for a client that talks to one directly
(Agent Canvas).`,
	}
	cmd.AddCommand(openhandsUpCmd(a))
	return cmd
}

func openhandsUpCmd(a *app) *cobra.Command {
	f := &openhands.UpFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "up [--image IMAGE] [--port 8000] [--name NAME]",
		Short: "Start one Agent Server in a sandbox and print its URL and key",
		Long: `Start one OpenHands Agent Server in a new sandbox (bridge network with egress
to the internet for the LLM) with its port published on the host, wait until
it answers, and print the URL and session key that Agent Canvas asks for.
The sandbox keeps running: remove it with sbx rm -f NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			host, err := a.localHost(cmd, sandbox.HostConfig{})
			if err != nil {
				return err
			}
			o, err := f.Options(slog.Default())
			if err != nil {
				return exitErr("%v", err)
			}
			be, err := host.WithPolicy(f.Policy())
			if err != nil {
				return exitErr("%v", err)
			}
			ctx, cancel := console.SignalContext()
			defer cancel()
			o.WarmPools = be
			res, err := openhands.Up(ctx, be, o)
			if err != nil {
				return sbxError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return render.JSON(out, res)
			}
			fmt.Fprintf(out, "Agent Server URL: %s\nSession API key:  %s\nSandbox:          %s (sbx rm -f %s removes it)\n", res.URL, res.Key, res.Name, res.Name)
			return nil
		},
	}
	f.Register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
