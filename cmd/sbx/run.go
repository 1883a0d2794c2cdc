package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

type runOptions struct {
	dockerargs.RunFlags
	images imageFlags
}

func runCmd(a *app) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] (IMAGE [CMD...] | --rootfs DIR CMD... | -- CMD...)",
		Short: "Run one command in a fresh sandbox and remove it afterwards (-d: keep it running)",
		Long: `Run one command in a fresh, fully isolated sandbox and tear it down when the
command exits. The first argument is an image, pulled as --pull says (as
docker run does); CMD replaces its Cmd. With --rootfs DIR the root is that
directory and CMD is the whole command. "sbx run -- CMD" is host mode: the
host's system directories read-only with a private writable layer on top.
"sbx run IMAGE -- CMD" runs CMD in IMAGE.

With -d the command starts as the main command of a long-lived sandbox (what
sbx create IMAGE CMD does) and run prints the sandbox's ID: follow its output
with sbx logs -f, wait for it with sbx wait, stop it with sbx stop or sbx
kill, remove it with sbx rm. --name, --label and --ttl name such a sandbox.
With -d --rm the sandbox is removed once its command ended or it was
stopped, as docker's is: by a background sbx process (sbx serve does it for
the sandboxes it serves; sbx gc removes those it finds stopped).

Exit codes: the command's own; 128+N when killed by signal N; 137 on an OOM
kill; 124 when --timeout fired; 126 when the command cannot be executed; 127
when it is not found; 125 when sbx itself failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(a, cmd, o, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	o.Register(cmd.Flags())
	o.images.register(cmd)
	return cmd
}

func runRun(a *app, cmd *cobra.Command, o *runOptions, args []string) error {
	cfg, err := o.images.hostConfig(a, cmd)
	if err != nil {
		return err
	}
	opts, cmdArgs, err := o.Options(args, cmd.Flags().ArgsLenAtDash(), a.host == "", cmd.Flags().Changed)
	if err != nil {
		return exitErr("%v", err)
	}
	image := opts.Image != ""
	if o.Named() {
		return runDetached(a, cmd, o, cfg, opts, cmdArgs)
	}
	b, err := a.open(cfg)
	if err != nil {
		return exitErr("%v", err)
	}
	ro := sbx.RunOptions{Options: opts, Timeout: o.Timeout, Tty: o.Tty, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	ro.Cmd = cmdArgs
	if image {
		ro.Entrypoint = dockerargs.Entrypoint(cmd.Flags().Changed("entrypoint"), o.Entrypoint)
		prog := render.NewProgress(cmd.ErrOrStderr(), o.images.quiet || !console.IsTerminal(os.Stderr))
		defer prog.Finish()
		ro.PullProgress = prog.Update
	}
	if o.Interactive {
		ro.Stdin = cmd.InOrStdin()
	}
	if o.Tty {
		restore, size, resize := console.Setup(o.Interactive)
		defer restore()
		ro.ConsoleSize, ro.Resize = size, resize
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro.Signals = console.ForwardSignals(ctx, cancel)
	rep, err := b.Run(ctx, ro)
	if err != nil {
		return exitErr("%v", dockerargs.WithImageHint(err, opts.Image))
	}
	if o.Report != "" {
		if err := render.WriteReportFile(o.Report, rep); err != nil {
			return exitErr("%v", err)
		}
	}
	if o.Stats {
		render.Report(cmd.ErrOrStderr(), rep)
	}
	if rep.Status == sbx.RunError && rep.Error != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", rep.Error)
	}
	return exitWith(rep.ExitCode)
}

// runDetached is run -d: a long-lived sandbox whose main command is the
// image's entrypoint with CMD (or the image's Cmd), or CMD with --rootfs
// and in host mode; it prints the sandbox's ID. Without -d (--name or
// --label) the command's output is followed, and its exit code is sbx's.
func runDetached(a *app, cmd *cobra.Command, o *runOptions, cfg sandbox.HostConfig, opts sbx.Options, cmdArgs []string) error {
	console.StopForwardSignals() // none forwarded: SIGINT and SIGTERM end the command below (SignalContext)
	b, err := a.open(cfg)
	if err != nil {
		return sbxError(err)
	}
	ctx, cancel := console.SignalContext()
	defer cancel()
	entrypoint := dockerargs.Entrypoint(cmd.Flags().Changed("entrypoint"), o.Entrypoint)
	opts.Cmd = cmdArgs
	if opts.Image != "" {
		prog := render.NewProgress(cmd.ErrOrStderr(), o.images.quiet || !console.IsTerminal(os.Stderr))
		opts.Cmd, err = dockerargs.ImageCommand(ctx, b, opts.Image, opts.Pull, entrypoint, cmdArgs, prog.Update)
		prog.Finish()
		if err != nil {
			return sbxError(dockerargs.WithImageHint(err, opts.Image))
		}
	}
	if !o.Detach {
		exit, err := dockerargs.RunAttached(ctx, b, opts, render.LogFrames(cmd.OutOrStdout(), cmd.ErrOrStderr()))
		if ctx.Err() != nil {
			return exitWith(130) // interrupted: the sandbox was removed
		}
		if err != nil {
			return sbxError(err)
		}
		render.Exit(io.Discard, cmd.ErrOrStderr(), opts.Name, exit)
		return exitWith(exit.ExitCode)
	}
	return createSandbox(ctx, a, cmd, b, opts)
}
