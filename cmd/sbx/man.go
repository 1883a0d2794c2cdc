package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/internal/manpage"
)

// manCmd writes the man pages of every command, generated from the
// commands themselves (internal/manpage): sbx.1, sbx-run.1, sbx-image-ls.1, ...
func manCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write the man pages of sbx and its commands (section 1) into DIR",
		Long: `Write the man pages of sbx and every command, generated from the commands'
own help, into DIR (created if missing): sbx.1, sbx-run.1, sbx-image-ls.1...
Install them with: sbx man /usr/local/share/man/man1 && mandb`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return exitErr("%v", err)
			}
			header := manpage.Header{Title: "SBX", Section: "1", Source: "sbx", Manual: "sbx manual"}
			if err := manpage.WriteTree(cmd.Root(), header, args[0]); err != nil {
				return exitErr("write the man pages: %v", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), args[0])
			return nil
		},
	}
}
