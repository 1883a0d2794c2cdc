package main

import (
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between a sandbox and the host (ID:/path on one side)",
		Long: `Copy a file or directory between a running sandbox and the host. One side is
ID:PATH (ID may be a name or an ID prefix; a relative PATH is relative to
the sandbox's working directory), the other a host path.
Like docker cp: copying onto an existing directory puts SRC inside it,
otherwise DST is created with SRC's content.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcRef, srcPath, srcIn := splitSandboxPath(args[0])
			dstRef, dstPath, dstIn := splitSandboxPath(args[1])
			if srcIn == dstIn {
				return &exitError{code: exitSbxFailed, msg: "give ID:PATH on exactly one side of sbx cp"}
			}
			m, err := openSandboxes()
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			if srcIn {
				err = m.CopyFrom(ctx, srcRef, srcPath, args[1])
			} else {
				err = m.CopyTo(ctx, dstRef, args[0], dstPath)
			}
			return sbxError(err)
		},
	})
}

// splitSandboxPath splits "ID:path", as docker cp does: a ':' with no '/'
// before it marks a sandbox path (write ./a:b for a host file named a:b).
// A relative path is relative to the sandbox's working directory.
func splitSandboxPath(s string) (ref, path string, ok bool) {
	ref, path, ok = strings.Cut(s, ":")
	if !ok || ref == "" || strings.Contains(ref, "/") || path == "" {
		return "", "", false
	}
	return ref, path, true
}
