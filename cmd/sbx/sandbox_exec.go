package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx/executor/api"
)

// exitTimeout is the exit code of a command stopped by --timeout, as
// coreutils timeout(1) reports it.
const exitTimeout = 124

type execOptions struct {
	interactive bool
	tty         bool
	env         []string
	workdir     string
	user        string
	timeout     time.Duration
}

func init() {
	o := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec [-i] [-t] [-e K=V] [-w DIR] [-u USER] [--timeout D] ID -- CMD [ARG...]",
		Short: "Run a command in a running sandbox",
		Long: `Run a command in a running sandbox. Output is streamed as it is produced and
the command's exit code becomes sbx's (124 when --timeout fired, 125 when sbx
itself failed). Without -i and -t the command runs through the sandbox's
executor; with -i (keep stdin open) or -t (a terminal that follows window
resizes) it joins the sandbox's namespaces directly, like docker exec.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return &exitError{code: exitSbxFailed, msg: "no command given: sbx exec ID -- CMD [ARG...]"}
			}
			return runExec(cmd, o, args[0], argv)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVarP(&o.interactive, "interactive", "i", false, "keep stdin open and connect it to the command")
	f.BoolVarP(&o.tty, "tty", "t", false, "allocate a terminal for the command")
	f.StringArrayVarP(&o.env, "env", "e", nil, "set an environment variable: KEY=VALUE")
	f.StringVarP(&o.workdir, "workdir", "w", "", "working directory inside the sandbox")
	f.StringVarP(&o.user, "user", "u", "", "user to run as: name, UID or UID:GID")
	f.DurationVar(&o.timeout, "timeout", 0, "kill the command after this long (e.g. 30s)")
	rootCmd.AddCommand(cmd)
}

func runExec(cmd *cobra.Command, o *execOptions, ref string, argv []string) error {
	for _, e := range o.env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("invalid --env %q: use KEY=VALUE", e)}
		}
	}
	if o.timeout < 0 {
		return &exitError{code: exitSbxFailed, msg: "invalid --timeout: must be positive"}
	}
	b, err := openSandboxes()
	if err != nil {
		return sbxError(err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	if o.interactive || o.tty {
		return executorAttach(ctx, cmd, b, ref, api.AttachRequest{ExecRequest: execRequest(o, argv), Tty: o.tty}, o.interactive, o.timeout)
	}
	req := execRequest(o, argv)
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	res, err := b.Exec(ctx, ref, req, func(f api.ExecFrame) error {
		switch f.Type {
		case api.FrameStdout:
			_, err := io.WriteString(stdout, f.Data)
			return err
		case api.FrameStderr:
			_, err := io.WriteString(stderr, f.Data)
			return err
		}
		return nil
	})
	if err != nil {
		return sbxError(err)
	}
	if res.TimedOut {
		return exitWith(exitTimeout)
	}
	return exitWith(res.ExitCode)
}

// execRequest is the executor request of sbx exec's flags.
func execRequest(o *execOptions, argv []string) api.ExecRequest {
	req := api.ExecRequest{Argv: argv, Cwd: o.workdir, User: o.user, TimeoutS: o.timeout.Seconds()}
	if len(o.env) > 0 {
		req.Env = map[string]string{}
		for _, e := range o.env {
			k, v, _ := strings.Cut(e, "=")
			req.Env[k] = v
		}
	}
	return req
}

func init() {
	var user, workdir string
	cmd := &cobra.Command{
		Use:   "shell [-u USER] [-w DIR] ID",
		Short: "Open an interactive shell in a running sandbox (bash if present, else sh)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			tty := term.IsTerminal(int(os.Stdin.Fd()))
			shellArgv := []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi`}
			b, err := openSandboxes()
			if err != nil {
				return sbxError(err)
			}
			return executorAttach(ctx, cmd, b, args[0], api.AttachRequest{
				ExecRequest: api.ExecRequest{Argv: shellArgv, Cwd: workdir, User: user}, Tty: tty,
			}, true, 0)
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "user to run as: name, UID or UID:GID")
	cmd.Flags().StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox")
	rootCmd.AddCommand(cmd)
}
