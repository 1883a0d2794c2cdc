package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
)

// The commands of a sandbox's main command (sbx run -d, sbx create IMAGE
// CMD), and the other docker verbs on sandboxes: logs, wait, kill,
// restart, port.

func logsCmd(a *app) *cobra.Command {
	var follow bool
	var tail int
	var view render.LogView
	var since, until string
	cmd := &cobra.Command{
		Use:   "logs [-f] [-t] [--tail N] [--since T] [--until T] SANDBOX",
		Short: "Print the output of a sandbox's main command (-f: follow it until the command ends)",
		Long: `Print what the sandbox's main command (sbx run -d, sbx create IMAGE CMD) wrote:
stdout to stdout, stderr to stderr. The sandbox keeps a bounded window of its
output (and its end once the command exited, also after sbx stop); output
that left the window is reported on stderr. -f follows new output until the
command has ended for good. -t puts each line's time first; --since and --until
(RFC 3339, Unix seconds, or a duration before now: 10m) show what was written
between them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < -1 {
				return exitErr("invalid --tail %d: a number of lines, or -1 for all", tail)
			}
			var err error
			if view.Since, view.Until, err = dockerargs.ParseTimeRange(since, until, time.Now()); err != nil {
				return exitErr("%v", err)
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				err := sbx.TailLogs(ctx, b, args[0], tail, follow, render.LogFramesView(cmd.OutOrStdout(), cmd.ErrOrStderr(), view))
				if follow && ctx.Err() != nil {
					return nil // interrupted: how following ends
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the command has ended")
	cmd.Flags().IntVarP(&tail, "tail", "n", -1, "print only the last N lines of what is held (-1: all)")
	cmd.Flags().BoolVarP(&view.Timestamps, "timestamps", "t", false, "put each line's time (RFC 3339) first")
	cmd.Flags().StringVar(&since, "since", "", "show output written since this time: RFC 3339, Unix seconds, or a duration before now (10m)")
	cmd.Flags().StringVar(&until, "until", "", "show output written before this time (forms as --since)")
	return cmd
}

func waitCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "wait SANDBOX...",
		Short: "Wait until the main commands of sandboxes end, and print their exit codes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				for _, ref := range args {
					exit, err := b.Wait(ctx, ref)
					if err != nil {
						return err
					}
					render.Exit(cmd.OutOrStdout(), cmd.ErrOrStderr(), ref, exit)
				}
				return nil
			})
		},
	}
}

func killCmd(a *app) *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill [-s SIGNAL] SANDBOX...",
		Short: "Send a signal (default SIGKILL) to the main commands of sandboxes",
		Long: `Send a signal to each sandbox's main command (sbx run -d, sbx create IMAGE
CMD). A sandbox without a main command is stopped at once by SIGKILL (to
stop one gracefully, use sbx stop).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := dockerargs.ParseSignal(sig)
			if err != nil {
				return exitErr("%v", err)
			}
			return each(a, cmd, args, func(ctx context.Context, b backend, ref string) error {
				return dockerargs.Kill(ctx, b, ref, name)
			})
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "SIGKILL", "the signal: a name (KILL, SIGTERM) or number")
	return cmd
}

func restartCmd(a *app) *cobra.Command {
	var o sbx.StopOptions
	var grace dockerargs.Seconds
	cmd := &cobra.Command{
		Use:   "restart [-t SECONDS] SANDBOX...",
		Short: "Stop sandboxes (SIGTERM, SIGKILL after -t) and start them again on their kept root",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Timeout = time.Duration(grace)
			return each(a, cmd, args, func(ctx context.Context, b backend, ref string) error {
				return dockerargs.Restart(ctx, b, ref, o)
			})
		},
	}
	grace = dockerargs.Seconds(sbx.DefaultStopTimeout)
	cmd.Flags().VarP(&grace, "time", "t", "grace period before SIGKILL: seconds (5) or a duration (500ms)")
	cmd.Flags().StringVarP(&o.Signal, "signal", "s", "", "first signal to send (default SIGTERM)")
	return cmd
}

func portCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "port SANDBOX [PORT[/PROTO]]",
		Short: "List a sandbox's published ports, or the host address of one",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				sb, err := b.Get(ctx, args[0])
				if err != nil {
					return err
				}
				query := ""
				if len(args) == 2 {
					query = args[1]
				}
				return render.Ports(cmd.OutOrStdout(), args[0], sb, query)
			})
		},
	}
}

func eventsCmd(a *app) *cobra.Command {
	var format string
	var since uint64
	cmd := &cobra.Command{
		Use:   "events [--since SEQ] [--format text|json]",
		Short: "Print sandbox and image events as they happen, until interrupted",
		Long: `Print events (sandbox.created, sandbox.ready, sandbox.died (the main command
ended), sandbox.exited, sandbox.oom, sandbox.removed, image.pulled, ...) as they happen, one per line, until
interrupted. Without --host they come from this host's state: changes made
by any sbx process are seen. --since SEQ first replays the events after SEQ
that are still held (a server holds the last 4096).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := render.CheckFormat(format, "text", "json"); err != nil {
				return exitErr("%v", err)
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				err := b.Events(ctx, since, render.Events(cmd.OutOrStdout(), format))
				if ctx.Err() != nil {
					return nil // interrupted: the normal end
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json (one object per line)")
	cmd.Flags().Uint64Var(&since, "since", 0, "replay the held events after this sequence number first")
	return cmd
}

func topCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "top [--format table|json] SANDBOX",
		Short: "List the processes of a running sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				ps, err := b.Top(ctx, args[0])
				if err != nil {
					return err
				}
				if format == "json" {
					return render.JSON(cmd.OutOrStdout(), ps)
				}
				return render.Processes(cmd.OutOrStdout(), ps)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	return cmd
}
