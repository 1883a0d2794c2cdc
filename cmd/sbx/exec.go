package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
)

type execOptions struct {
	interactive, tty bool
	detach           bool
	env              []string
	workdir, user    string
	timeout          time.Duration
}

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
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVarP(&o.detach, "detach", "d", false, "start the command in the background and return at once")
	f.BoolVarP(&o.interactive, "interactive", "i", false, "keep stdin open and connect it to the command")
	f.BoolVarP(&o.tty, "tty", "t", false, "allocate a terminal for the command")
	f.StringArrayVarP(&o.env, "env", "e", nil, "set an environment variable: KEY=VALUE")
	f.StringVarP(&o.workdir, "workdir", "w", "", "working directory inside the sandbox")
	f.StringVarP(&o.user, "user", "u", "", "user to run as: name, UID or UID:GID")
	f.DurationVar(&o.timeout, "timeout", 0, "kill the command after this long (e.g. 30s)")
	return cmd
}

func runExec(a *app, cmd *cobra.Command, o *execOptions, ref string, argv []string) error {
	req := sbx.ExecRequest{Argv: argv, Cwd: o.workdir, User: o.user, TimeoutS: o.timeout.Seconds()}
	env, err := dockerargs.ParseEnv(o.env)
	if err != nil {
		return exitErr("%v", err)
	}
	req.Env = env
	if o.timeout < 0 {
		return exitErr("invalid --timeout: must be positive")
	}
	ctx, b, cancel, err := a.backendCtx()
	if err != nil {
		return sbxError(err)
	}
	defer cancel()
	if o.detach {
		if o.interactive || o.tty {
			return exitErr("-d does not go with -i or -t: a detached command has no input or terminal")
		}
		req.Detach = true
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
	if o.interactive || o.tty {
		return attach(ctx, cmd, b, ref, sbx.AttachOptions{ExecRequest: req, Tty: o.tty}, o.interactive)
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	res, err := b.Exec(ctx, ref, req, func(f sbx.ExecFrame) error {
		switch f.Type {
		case sbx.FrameStdout:
			_, err := io.WriteString(stdout, f.Data)
			return err
		case sbx.FrameStderr:
			_, err := io.WriteString(stderr, f.Data)
			return err
		}
		return nil
	})
	if err != nil {
		return sbxError(err)
	}
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
		if t := os.Getenv("TERM"); t != "" {
			if o.Env == nil {
				o.Env = map[string]string{}
			}
			if _, ok := o.Env["TERM"]; !ok {
				o.Env["TERM"] = t
			}
		}
		restore, size, resize := setupTerminal(interactive)
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
			ctx, b, cancel, err := a.backendCtx()
			if err != nil {
				return sbxError(err)
			}
			defer cancel()
			argv := []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi`}
			return attach(ctx, cmd, b, args[0], sbx.AttachOptions{
				ExecRequest: sbx.ExecRequest{Argv: argv, Cwd: workdir, User: user},
				Tty:         term.IsTerminal(int(os.Stdin.Fd())),
			}, true)
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
Like docker cp: copying onto an existing directory puts SRC inside it,
otherwise DST is created with SRC's content.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcRef, srcPath, srcIn := dockerargs.SplitCopyPath(args[0])
			dstRef, dstPath, dstIn := dockerargs.SplitCopyPath(args[1])
			if srcIn == dstIn {
				return exitErr("give ID:PATH on exactly one side of sbx cp")
			}
			ctx, b, cancel, err := a.backendCtx()
			if err != nil {
				return sbxError(err)
			}
			defer cancel()
			if srcIn {
				err = b.CopyFrom(ctx, srcRef, srcPath, args[1])
			} else {
				err = b.CopyTo(ctx, dstRef, args[0], dstPath)
			}
			return sbxError(err)
		},
	}
}
