// Package snapshotcmd is sbx's checkpoint, restore, fork and snapshot
// commands (docs/snapshots.md), over the contract's sbx.Snapshots.
package snapshotcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/internal/copyout"
	"github.com/sbxrun/sbx/render"
)

// WithBackend runs fn with the CLI's backend (local or remote) and maps
// its error to sbx's exit codes.
type WithBackend func(fn func(ctx context.Context, backend any) error) error

type app struct{ with WithBackend }

// withSnapshots calls fn with the backend as sbx.Snapshots.
func (a app) withSnapshots(fn func(context.Context, sbx.Snapshots) error) error {
	return a.with(func(ctx context.Context, b any) error {
		s, ok := b.(sbx.Snapshots)
		if !ok {
			return fmt.Errorf("%w: this backend cannot checkpoint sandboxes (run sbx on the sandboxes' host)", sbx.ErrUnsupported)
		}
		return fn(ctx, s)
	})
}

// Commands returns checkpoint, restore, fork and snapshot.
func Commands(with WithBackend) []*cobra.Command {
	a := app{with}
	var co sbx.CheckpointOptions
	ckpt := &cobra.Command{Use: "checkpoint [--leave-running] ID [SNAPSHOT]", Args: cobra.RangeArgs(1, 2),
		Short: "Write a running sandbox's processes, writable layer and record to a snapshot; it stops unless --leave-running",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				co.Snapshot = args[1]
			}
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				snap, err := s.Checkpoint(ctx, args[0], co)
				if err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), snap.Name)
				}
				return err
			})
		}}
	ckpt.Flags().BoolVar(&co.LeaveRunning, "leave-running", false, "keep the sandbox running (paused for the dump)")
	var ro sbx.RestoreOptions
	restore := &cobra.Command{Use: "restore SNAPSHOT [--name N]", Args: cobra.ExactArgs(1),
		Short: "Start a new sandbox from a snapshot; prints its ID",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				sb, err := s.Restore(ctx, args[0], ro)
				if err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
				}
				return err
			})
		}}
	restore.Flags().StringVar(&ro.Name, "name", "", "name of the new sandbox")
	var fo sbx.ForkOptions
	fork := &cobra.Command{Use: "fork ID [-n N]", Args: cobra.ExactArgs(1),
		Short: "Start N running copies of a running sandbox, which runs on; prints their IDs",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				sbs, err := s.Fork(ctx, args[0], fo)
				for _, sb := range sbs {
					fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
				}
				return err
			})
		}}
	fork.Flags().IntVarP(&fo.Count, "count", "n", 1, "how many copies")
	fork.Flags().BoolVar(&fo.Keep, "keep", false, "keep the snapshot the copies start from")
	return []*cobra.Command{ckpt, restore, fork, snapshotCmd(a)}
}

func snapshotCmd(a app) *cobra.Command {
	root := &cobra.Command{Use: "snapshot", Args: cobra.NoArgs, Short: "Manage snapshots: ls, inspect, rm, export, import"}
	ls := &cobra.Command{Use: "ls", Short: "List snapshots", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				list, err := s.ListSnapshots(ctx)
				if err != nil {
					return err
				}
				return render.Snapshots(cmd.OutOrStdout(), list, time.Now())
			})
		}}
	inspect := &cobra.Command{Use: "inspect SNAPSHOT...", Short: "Check snapshots' files and print their records as JSON", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				var out []*sbx.Snapshot
				for _, name := range args {
					snap, err := s.InspectSnapshot(ctx, name)
					if err != nil {
						return err
					}
					out = append(out, snap)
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			})
		}}
	rm := &cobra.Command{Use: "rm SNAPSHOT...", Short: "Remove snapshots", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				for _, name := range args {
					if err := s.RemoveSnapshot(ctx, name); err != nil {
						return err
					}
				}
				return nil
			})
		}}
	var output string
	export := &cobra.Command{Use: "export SNAPSHOT -o FILE", Short: "Write a snapshot to one file (it holds the sandbox's memory: keep it private)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if output == "" && console.IsTerminal(out) {
				return errors.New("refusing to write a snapshot to a terminal: give -o FILE or redirect stdout")
			}
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				if output == "" {
					return s.ExportSnapshot(ctx, args[0], out)
				}
				return copyout.WriteFileMode(output, 0o600, func(w io.Writer) error { return s.ExportSnapshot(ctx, args[0], w) })
			})
		}}
	export.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	var name string
	imp := &cobra.Command{Use: "import FILE [--name N]", Short: "Add a snapshot from a file written by snapshot export ('-' reads stdin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := io.Reader(os.Stdin)
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			return a.withSnapshots(func(ctx context.Context, s sbx.Snapshots) error {
				snap, err := s.ImportSnapshot(ctx, r, name)
				if err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), snap.Name)
				}
				return err
			})
		}}
	imp.Flags().StringVar(&name, "name", "", "name of the imported snapshot (default: its own)")
	root.AddCommand(ls, inspect, rm, export, imp)
	return root
}
