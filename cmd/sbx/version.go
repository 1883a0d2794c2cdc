package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/internal/version"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the sbx version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "sbx %s (commit %s, %s, %s/%s)\n",
				version.Version, version.Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	})
}
