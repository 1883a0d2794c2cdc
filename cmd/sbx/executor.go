package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/executor"
)

func executorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "executor [--listen-fd N | --socket PATH] [flags]",
		Short: "Run the in-sandbox agent (PID 1 of a long-lived sandbox)",
		Long: `Serve the executor API (commands, shell sessions, files) over HTTP on a unix
socket: the listening socket passed as a file descriptor (--listen-fd, the way
sbx starts it inside a sandbox) or a socket path (--socket). SIGTERM or SIGINT
stops every command, SIGKILL after --stop-timeout, and exits. Sandboxes run the
same code from the small sbx-executor binary; see "sbx executor -h" for flags.`,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitWith(executor.Main(args))
		},
	}
}
