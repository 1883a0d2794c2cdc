package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/isolate/reaper"
)

func init() {
	var statusFD int
	var tty bool
	cmd := &cobra.Command{
		Use:    "reaper [--status-fd N] [--tty] -- CMD [ARG...]",
		Short:  "Minimal init of one-shot sandboxes (runs inside the sandbox)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitWith(reaper.Run(reaper.Options{Args: args, StatusFD: statusFD, Tty: tty}))
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().IntVar(&statusFD, "status-fd", -1, "write the command's status as JSON to this fd")
	cmd.Flags().BoolVar(&tty, "tty", false, "give stdin's terminal to the command")
	rootCmd.AddCommand(cmd)
}
