package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/sandbox"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "gc",
		Short: "Remove what crashed sandboxes left behind (mounts, cgroups, directories)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteHost != "" {
				return remoteGC(cmd)
			}
			runner := &sandbox.Runner{RunRoot: global.runRoot}
			if _, err := os.Stat(filepath.Join(global.root, "network")); err == nil {
				nw, err := openNetwork()
				if err != nil {
					return err
				}
				defer nw.Close()
				runner.Network = nw
			}
			cleaned, err := runner.GCRuns()
			for _, id := range cleaned {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", id)
			}
			if err != nil {
				return err
			}
			if err := gcSandboxes(cmd.Context(), cmd.OutOrStdout()); err != nil {
				return err
			}
			return cgroup.RemoveParentIfEmpty()
		},
	})
}
