package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/isolate/reaper"
	"github.com/sbxrun/sbx/seccomp"
)

func init() {
	var statusFD, seccompFD, lifelineFD int
	var tty bool
	cmd := &cobra.Command{
		Use:    "reaper [--status-fd N] [--lifeline-fd N] [--tty] -- CMD [ARG...]",
		Short:  "Minimal init of one-shot sandboxes (runs inside the sandbox)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if seccompFD >= 0 {
				if err := seccomp.LoadFromFD(seccompFD); err != nil {
					return &exitError{code: reaper.ExitCannotExec, msg: err.Error()}
				}
			}
			return exitWith(reaper.Run(reaper.Options{Args: args, StatusFD: statusFD, Tty: tty, LifelineFD: lifelineFD}))
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().IntVar(&statusFD, "status-fd", -1, "write the command's status as JSON to this fd")
	cmd.Flags().IntVar(&seccompFD, "seccomp-fd", -1, "load the seccomp filter read from this fd before starting the command")
	cmd.Flags().IntVar(&lifelineFD, "lifeline-fd", -1, "kill the sandbox when this pipe closes")
	cmd.Flags().BoolVar(&tty, "tty", false, "give stdin's terminal to the command")
	rootCmd.AddCommand(cmd)
}
