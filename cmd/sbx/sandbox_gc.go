package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/server/api"
)

// gcSandboxes removes what crashed long-lived sandboxes left behind: it
// undoes interrupted creates and removes, removes expired sandboxes, and
// releases runtime directories, mounts, cgroups and names of no sandbox.
func gcSandboxes(ctx context.Context, w io.Writer) error {
	m, err := openManager()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := m.GC(ctx)
	if rep != nil {
		printGC(w, api.GCReport{Expired: rep.Expired, Interrupted: rep.Interrupted, Stopped: rep.Stopped, Orphans: rep.Orphans})
	}
	return err
}

// printGC prints what a garbage collection removed, one line each.
func printGC(w io.Writer, rep api.GCReport) {
	for _, id := range rep.Expired {
		fmt.Fprintln(w, "removed expired", id)
	}
	for _, id := range rep.Interrupted {
		fmt.Fprintln(w, "removed interrupted", id)
	}
	for _, id := range rep.Stopped {
		fmt.Fprintln(w, "marked stopped", id)
	}
	for _, o := range rep.Orphans {
		fmt.Fprintln(w, "removed orphan", o)
	}
}

// remoteGC is `sbx gc --host`: the server's garbage collection of its
// sandboxes.
func remoteGC(cmd *cobra.Command) error {
	c, err := remoteClient()
	if err != nil {
		return sbxError(err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	rep, err := c.GC(ctx)
	if err != nil {
		return sbxError(err)
	}
	printGC(cmd.OutOrStdout(), rep)
	return nil
}
