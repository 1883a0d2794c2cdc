package main

import (
	"context"
	"fmt"
	"io"
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
	return err
}
