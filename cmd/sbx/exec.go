package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/dockerargs"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/render"
)

type execOptions = dockerargs.ExecFlags

func execCmd(a *app) *cobra.Command {
	o := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec [-d] [-i] [-t] [-e K=V] [-w DIR] [-u USER] [--timeout D] ID -- CMD [ARG...]",
		Short: "Run a command in a running sandbox",
		Long: `Run a command in a running sandbox. Output is streamed as it is produced and
the command's exit code becomes sbx's (124 when --timeout fired, 125 when sbx
itself failed). The sandbox's executor starts it, as a child of the
sandbox's PID 1 under its seccomp filter; with -i (keep stdin open) or -t (a
terminal that follows window resizes) through its attach endpoint.
With -d the command starts in the background and exec returns at once,
printing nothing (as docker exec -d): it runs on, with no input or output,
until it ends, --timeout passes or the sandbox stops.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return exitErr("no command given: sbx exec ID -- CMD [ARG...]")
			}
			return runExec(a, cmd, o, args[0], argv)
		},
	}
	cmd.Flags().SetInterspersed(false)
	o.Register(cmd.Flags())
	return cmd
}

func runExec(a *app, cmd *cobra.Command, o *execOptions, ref string, argv []string) error {
	req, err := o.Request(argv)
	if err != nil {
		return exitErr("%v", err)
	}
	ctx, b, cancel, err := a.backendCtx()
	if err != nil {
		return sbxError(err)
	}
	defer cancel()
	if o.Detach {
		res, err := b.Exec(ctx, ref, req, nil)
		if err != nil {
			return sbxError(err)
		}
		if res.Pid == 0 { // it did not start
			fmt.Fprint(cmd.ErrOrStderr(), res.Stderr)
			return exitWith(res.ExitCode)
		}
		return nil
	}
	if o.Interactive || o.Tty {
		return attach(ctx, cmd, b, ref, sbx.AttachOptions{ExecRequest: req, Tty: o.Tty}, o.Interactive)
	}
	res, err := b.Exec(ctx, ref, req, sbx.WriteOutput(cmd.OutOrStdout(), cmd.ErrOrStderr()))
	if err != nil {
		return sbxError(err)
	}
	render.ExecEnd(cmd.ErrOrStderr(), res)
	if res.TimedOut {
		return exitWith(sbx.ExitTimeout)
	}
	return exitWith(res.ExitCode)
}

// attach runs an interactive command, putting the user's terminal in raw
// mode when a terminal is asked for and following its size.
func attach(ctx context.Context, cmd *cobra.Command, b backend, ref string, o sbx.AttachOptions, interactive bool) error {
	o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
	if interactive {
		o.Stdin = cmd.InOrStdin()
	}
	if o.Tty {
		o.Env = console.WithTERM(o.Env)
		restore, size, resize := console.Setup(interactive)
		defer restore()
		o.Size, o.Resize = size, resize
	}
	res, err := b.Attach(ctx, ref, o)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return exitErr("interrupted")
		}
		return sbxError(err)
	}
	render.ExecEnd(o.Stderr, res)
	if res.TimedOut {
		return exitWith(sbx.ExitTimeout)
	}
	return exitWith(res.ExitCode)
}

func shellCmd(a *app) *cobra.Command {
	var user, workdir string
	cmd := &cobra.Command{
		Use:   "shell [-u USER] [-w DIR] ID",
		Short: "Open an interactive shell in a running sandbox (bash if present, else sh)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi`}
			return a.withBackend(func(ctx context.Context, b backend) error {
				return attach(ctx, cmd, b, args[0], sbx.AttachOptions{
					ExecRequest: sbx.ExecRequest{Argv: argv, Cwd: workdir, User: user},
					Tty:         console.IsTerminal(os.Stdin),
				}, true)
			})
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "user to run as: name, UID or UID:GID")
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox")
	return cmd
}

func cpCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between a sandbox and the host (ID:/path on one side)",
		Long: `Copy a file or directory between a running sandbox and the host. One side is
ID:PATH (ID may be a name or an ID prefix; a relative PATH is relative to
the sandbox's working directory), the other a host path.
Like docker cp: copying onto an existing directory puts SRC inside it, onto
an existing file (or a character device or pipe) writes into it, otherwise
DST is created with SRC's content. A DST of - writes a tar stream to stdout;
a SRC of - unpacks a tar stream from stdin into the directory DST.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withBackend(func(ctx context.Context, b backend) error {
				return execclient.Copy(ctx, b, args[0], args[1], os.Stdin, os.Stdout)
			})
		},
	}
}
