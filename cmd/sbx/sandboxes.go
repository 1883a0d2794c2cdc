package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/template"
	"time"

	"github.com/sbxrun/sbx/internal/copyout"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

type createOptions struct {
	dockerargs.CreateFlags
	images imageFlags
}

func createCmd(a *app) *cobra.Command {
	o := &createOptions{}
	var rm bool
	cmd := &cobra.Command{
		Use:   "create [flags] (IMAGE [CMD...] | --rootfs DIR [-- CMD...])",
		Short: "Create a long-lived sandbox and print its ID once it is ready",
		Long: `Create a long-lived sandbox whose PID 1 is the sbx executor, and print its ID
once the executor answers. Run commands in it with sbx exec and sbx shell;
remove it with sbx rm (or let --ttl remove it).

With CMD the sandbox gets a main command, started once it is ready: the
image's Entrypoint followed by CMD (with --rootfs DIR -- CMD, the whole command), as
docker create IMAGE CMD does; sbx logs, sbx wait and sbx kill act on it.
With --rm the sandbox is removed once that command ended or it was stopped.

Every flag of sbx run applies, plus --name, --volume, --tmpfs, --label and
--ttl. --timeout does not: a sandbox's lifetime is --ttl, a command's is
sbx exec --timeout.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := o.images.hostConfig(a, cmd)
			if err != nil {
				return err
			}
			args, cmdArgs := dockerargs.SplitCreateArgs(args, o.Rootfs != "", cmd.Flags().ArgsLenAtDash())
			opts, err := o.Options(args, a.host == "")
			if err != nil {
				return exitErr("%v", err)
			}
			b, err := a.open(cfg)
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := console.SignalContext()
			defer cancel()
			opts.Cmd, opts.AutoRemove = cmdArgs, rm
			if opts.Image != "" && len(cmdArgs) > 0 {
				if opts.Cmd, err = dockerargs.ImageCommand(ctx, b, opts.Image, opts.Pull, nil, cmdArgs, nil); err != nil {
					return sbxError(err)
				}
			}
			return createSandbox(ctx, a, cmd, b, opts)
		},
	}
	o.Register(cmd.Flags())
	o.images.register(cmd)
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVar(&rm, "rm", false, "remove the sandbox once its main command (CMD) ended or it was stopped")
	return cmd
}

func listCmd(a *app, name string) *cobra.Command {
	var ps dockerargs.PsFlags
	cmd := &cobra.Command{
		Use:   name + " [-a] [-q] [-n N | -l] [--no-trunc] [--pooled] [--format table|json|TEMPLATE] [--filter label=K=V|status=S|name=N]",
		Short: "List sandboxes (running ones; -a for all)",
		Long: `List sandboxes, oldest first: running ones, or all with -a. -n N shows the N
created last (of all), -l the last one. --format takes table, json, or a Go
template run for each sandbox over its record, as docker's does, e.g.
--format '{{.ID}} {{.Status}} {{.Options.Image}}' ({{json .Network}} prints
a field as JSON).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, keep, err := ps.Filter()
			if err != nil {
				return exitErr("%v", err)
			}
			tmpl, err := render.ParseFormat(ps.Format)
			if err != nil {
				return exitErr("%v", err)
			}
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return sbxError(err)
			}
			list, err := b.List(context.Background(), f)
			if err != nil {
				return sbxError(err)
			}
			return render.Sandboxes(cmd.OutOrStdout(), dockerargs.Newest(list, keep), render.ListOptions{Quiet: ps.Quiet, NoTrunc: ps.NoTrunc, Format: ps.Format, Template: tmpl})
		},
	}
	ps.Register(cmd.Flags())
	return cmd
}

func inspectCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "inspect [-f TEMPLATE] ID...",
		Short: "Print sandboxes as JSON: spec, state, times, PIDs, network, socket, resources",
		Long: `Print the records of sandboxes as a JSON array, or with -f a Go template run for
each over its record, as docker inspect -f does: -f '{{.Status}}',
-f '{{.Network.IP}}', -f '{{json .Options}}'.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tmpl *template.Template
			if format != "" {
				var err error
				if tmpl, err = render.ParseFormat(format); err != nil || tmpl == nil {
					return exitErr("invalid --format %q: give a Go template like '{{.Status}}'", format)
				}
			}
			b, err := a.open(sandbox.HostConfig{})
			if err != nil {
				return sbxError(err)
			}
			var out []*sbx.Sandbox
			for _, ref := range args {
				sb, err := b.Inspect(context.Background(), ref)
				if err != nil {
					return sbxError(err)
				}
				out = append(out, sb)
			}
			if tmpl != nil {
				return render.Each(cmd.OutOrStdout(), tmpl, render.DockerViews(out))
			}
			return render.JSON(cmd.OutOrStdout(), out)
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "", "a Go template run for each sandbox's record")
	return cmd
}

func statsCmd(a *app) *cobra.Command {
	var noStream bool
	var format string
	cmd := &cobra.Command{
		Use:   "stats [--no-stream] [--format table|json] [SANDBOX...]",
		Short: "Show sandboxes' CPU %, CPU time, memory, peak memory, pids and OOM kills (all running ones without SANDBOX)",
		Long: `Show the usage of the sandboxes named, or of every running one, each second
until interrupted (--no-stream: one reading), as docker stats does. CPU % is
the share of one CPU used since the previous reading (the first reading comes
after one second). The table's header is printed once.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := render.CheckFormat(format, "table", "json"); err != nil {
				return exitErr("%v", err)
			}
			w, header := cmd.OutOrStdout(), true
			return a.withBackend(func(ctx context.Context, b backend) error {
				return sbx.WatchStatsOf(ctx, b, args, time.Second, noStream, func(rows []sbx.StatsRow) error {
					err := render.StatsRows(w, rows, format, header)
					header = false
					return err
				})
			})
		},
	}
	cmd.Flags().BoolVar(&noStream, "no-stream", false, "print one reading and exit")
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json (one object per sandbox and reading, a line each)")
	return cmd
}

// eachCmd is a command that runs op for every sandbox argument, printing
// the ID of each success (as docker does) and going on after errors.
func eachCmd(a *app, name, short string, op func(sbx.Sandboxes, context.Context, string) (*sbx.Sandbox, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return each(a, cmd, args, func(ctx context.Context, b backend, ref string) error {
				_, err := op(b, ctx, ref)
				return err
			})
		},
	}
}

func each(a *app, cmd *cobra.Command, args []string, op func(context.Context, backend, string) error) error {
	ctx, b, cancel, err := a.backendCtx()
	if err != nil {
		return sbxError(err)
	}
	defer cancel()
	var last error
	for _, ref := range args {
		if err := op(ctx, b, ref); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", err)
			last = sbxError(err)
			continue
		}
		fmt.Fprintln(cmd.OutOrStdout(), ref)
	}
	var ee *exitError
	if errors.As(last, &ee) {
		return &exitError{code: ee.code} // already printed
	}
	return nil
}

func stopCmd(a *app) *cobra.Command {
	var o sbx.StopOptions
	grace := dockerargs.Seconds(sbx.DefaultStopTimeout)
	cmd := &cobra.Command{
		Use:   "stop [-t SECONDS] [--signal SIG] ID...",
		Short: "Stop sandboxes: SIGTERM to PID 1, then SIGKILL after -t",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Timeout = time.Duration(grace)
			return each(a, cmd, args, func(ctx context.Context, b backend, ref string) error {
				_, err := b.Stop(ctx, ref, o)
				return err
			})
		},
	}
	cmd.Flags().VarP(&grace, "time", "t", "grace period before SIGKILL: seconds (5) or a duration (500ms)")
	cmd.Flags().StringVarP(&o.Signal, "signal", "s", "", "first signal to send (default SIGTERM)")
	cmd.Flags().BoolVar(&o.Checkpoint, "checkpoint", false, "checkpoint the processes instead (no signal): start resumes them")
	return cmd
}

func rmCmd(a *app) *cobra.Command {
	var o sbx.RemoveOptions
	cmd := &cobra.Command{
		Use:   "rm [-f] ID...",
		Short: "Remove sandboxes and everything they created on the host",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return each(a, cmd, args, func(ctx context.Context, b backend, ref string) error {
				return b.Remove(ctx, ref, o)
			})
		},
	}
	cmd.Flags().BoolVarP(&o.Force, "force", "f", false, "kill running sandboxes instead of refusing")
	return cmd
}

func commitCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "commit ID NAME",
		Short: "Store a sandbox's writable layer as a new image NAME in the image cache",
		Long: `Store the sandbox's writable layer as a new layer on top of its image, as a new
image NAME in the image cache: sandboxes created from NAME (sbx create NAME,
sbx run NAME) start with that state at once. A running sandbox is paused
while its layer is read.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				img, err := b.Commit(ctx, args[0], args[1])
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", sbx.FamiliarName(img.Name), img.Digest)
				}
				return err
			})
		},
	}
}

func prepareCmd(a *app) *cobra.Command {
	o := &createOptions{}
	var script, scriptFile string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "prepare [flags] BASE (-c SCRIPT | --script FILE)",
		Short: "Build (once) an image from a base image plus a setup script, cached by their hash",
		Long: `Run a setup script in a throw-away sandbox created from BASE and store the
result as an image named sbx-prepared:<hash>, where the hash covers BASE's
digest, the script, and the environment, user, working directory and network
it ran with. The next prepare with the same inputs finds the image in the
cache and returns at once. Prints the image name; create sandboxes from it
with sbx create NAME. The script's output goes to stderr.

The sandbox flags of sbx create apply to the build sandbox (--network host
lets the script download packages).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			script, err := dockerargs.ReadScript(script, scriptFile)
			if err != nil {
				return exitErr("%v", err)
			}
			opts, err := o.Options(args, a.host == "")
			if err != nil {
				return exitErr("%v", err)
			}
			if a.host != "" && !cmd.Flags().Changed("seccomp") {
				opts.Seccomp = "" // the server's default
			}
			po := sbx.PrepareOptions{Base: args[0], Script: script, Sandbox: opts}
			po.Sandbox.Image = ""
			if !quiet {
				po.Output = cmd.ErrOrStderr()
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				res, err := b.Prepare(ctx, po)
				if err != nil {
					return err
				}
				if res.Cached && !quiet {
					fmt.Fprintln(cmd.ErrOrStderr(), "sbx: prepared image found in the cache")
				}
				fmt.Fprintln(cmd.OutOrStdout(), sbx.FamiliarName(res.Image.Name))
				return nil
			})
		},
	}
	f := cmd.Flags()
	o.SandboxFlags.Register(f)
	f.StringVarP(&script, "command", "c", "", "the setup script, run with /bin/sh -c")
	f.StringVar(&scriptFile, "script", "", "a file holding the setup script")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not show the script's output")
	return cmd
}

// expiryWatcherCmd is the background process that removes sandboxes as
// their --ttl passes; sbx create starts it.
func expiryWatcherCmd(a *app) *cobra.Command {
	return backgroundCmd(a, "expiry-watcher", "Remove sandboxes as their --ttl passes, checkpoint those idle past --idle-timeout; exits when none has either (started by sbx create)", cobra.NoArgs,
		func(ctx context.Context, h *sandbox.Host, _ []string) error { return h.RunWatchers(ctx) })
}

// createSandbox creates opts and prints the sandbox's ID. On this host it
// starts what outlives sbx (a server does both for its own sandboxes):
// the expiry watcher for a TTL or an idle timeout, the remover of an AutoRemove sandbox
// (startAutoRemover).
func createSandbox(ctx context.Context, a *app, cmd *cobra.Command, b backend, opts sbx.Options) error {
	sb, err := b.Create(ctx, opts)
	if err != nil {
		return sbxError(err)
	}
	if a.local != nil && ((sb.ExpiresAt != nil && !a.local.ExpiryWatcherRunning()) || (sb.Options.IdleTimeout > 0 && !a.local.IdleWatcherRunning())) {
		_ = spawnDetached(a, "expiry-watcher")
	}
	if err := startAutoRemover(a, sb); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
	return nil
}

// startAutoRemover starts, for a local sandbox created with AutoRemove,
// the background process that removes it once its command ended (no
// daemon does; a server does it for the sandboxes it serves, sbx gc for
// those whose remover died).
func startAutoRemover(a *app, sb *sbx.Sandbox) error {
	if a.local == nil || !sb.Options.AutoRemove {
		return nil
	}
	if err := spawnDetached(a, "auto-remove", sb.ID); err != nil {
		return sbxError(fmt.Errorf("sandbox %s runs, but its remover did not start (remove it with sbx rm): %w", sb.ShortID(), err))
	}
	return nil
}

// autoRemoverCmd is the background process that removes a sandbox of
// sbx run -d --rm once its command ended; run -d starts it.
func autoRemoverCmd(a *app) *cobra.Command {
	return backgroundCmd(a, "auto-remove ID", "Remove a sandbox once its main command ended (started by sbx run -d --rm)", cobra.ExactArgs(1),
		func(ctx context.Context, h *sandbox.Host, args []string) error {
			return h.RemoveWhenDone(ctx, args[0])
		})
}

// backgroundCmd is a hidden command that runs work on the local host
// until it returns or a signal ends it (then it exits 0).
func backgroundCmd(a *app, use, short string, args cobra.PositionalArgs, work func(context.Context, *sandbox.Host, []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Hidden: true, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.localHost(cmd, sandbox.HostConfig{})
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := console.SignalContext()
			defer cancel()
			if err := work(ctx, h, args); err != nil && ctx.Err() == nil {
				return sbxError(err)
			}
			return nil
		},
	}
}

// spawnDetached starts sbx with args on this command's state in the
// background, detached from this process and its terminal
// (sandbox.SpawnDetached).
func spawnDetached(a *app, args ...string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return sandbox.SpawnDetached(a.selfArgv(exe, args...))
}

// selfArgv is the command line of sbx (exe) with args on this state.
func (a *app) selfArgv(exe string, args ...string) []string {
	return append([]string{exe, "--root", a.root, "--run-root", a.runRoot, "--log-level", a.logLevel}, args...)
}

// egressdCmd is the background process that runs the bridge's egress
// proxy and resolver while sandboxes name hosts in their egress policy.
func egressdCmd(a *app) *cobra.Command {
	return backgroundCmd(a, "egressd", "Run the bridge's egress proxy and resolver while sandboxes name hosts in --egress; exits when none does (started by sbx create)", cobra.NoArgs,
		func(ctx context.Context, h *sandbox.Host, _ []string) error {
			_, err := h.RunEgress(ctx, true)
			return err
		})
}

func renameCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rename SANDBOX NEW_NAME",
		Short: "Give a sandbox a new unique name",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				_, err := b.Rename(ctx, args[0], args[1])
				return err
			})
		},
	}
}

func diffCmd(a *app) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "diff [--format text|json] SANDBOX",
		Short: "List what a sandbox changed in its root over its image: A added, C changed, D deleted",
		Long: `List the paths of the sandbox's writable layer, sorted, as docker diff does:
A added, C changed (the image has the path), D deleted. The files sbx writes
into every sandbox (/etc/hosts, /etc/hostname, /etc/resolv.conf) are left
out. Volumes and tmpfs mounts are not part of the root and never listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := render.CheckFormat(format, "text", "json"); err != nil {
				return exitErr("%v", err)
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				changes, err := b.Diff(ctx, args[0])
				if err != nil {
					return err
				}
				return render.Changes(cmd.OutOrStdout(), changes, format)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func exportCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "export [-o FILE] SANDBOX",
		Short: "Write a sandbox's root file system as a tar (to stdout, or -o FILE)",
		Long: `Write the sandbox's root file system, its image with what it changed, as one
tar (docker export): to stdout (not a terminal) or to FILE, which appears only
once the tar is complete. A running sandbox is paused while it is read.
Volumes and tmpfs mounts are not part of the root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeOut(a, cmd, output, "a tar", func(ctx context.Context, b backend, w io.Writer) error {
				return b.Export(ctx, args[0], w)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

// writeOut calls write with stdout (refused when it is a terminal: what
// names the stream), or with -o FILE, which appears only once write
// succeeded (copyout.WriteFile).
func writeOut(a *app, cmd *cobra.Command, output, what string, write func(context.Context, backend, io.Writer) error) error {
	out := cmd.OutOrStdout()
	if output == "" && console.IsTerminal(out) {
		return exitErr("refusing to write %s to a terminal: give -o FILE or redirect stdout", what)
	}
	return a.withBackend(func(ctx context.Context, b backend) error {
		if output == "" {
			return write(ctx, b, out)
		}
		return copyout.WriteFile(output, func(w io.Writer) error { return write(ctx, b, w) })
	})
}
