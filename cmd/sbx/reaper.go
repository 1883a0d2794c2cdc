package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/isolate/reaper"
)

func reaperCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "reaper [--status-fd N] [--lifeline-fd N] [--seccomp-fd N] [--tty] -- CMD [ARG...]",
		Short:              "Minimal init of one-shot sandboxes (runs inside the sandbox)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitWith(reaper.Main(args))
		},
	}
}
