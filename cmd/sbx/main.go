// Command sbx runs untrusted code in Linux sandboxes: namespaces, cgroups
// and seccomp, started directly with libcontainer, without a daemon.
//
// The CLI is a front-end of the contract (package sbx): it parses flags,
// chooses one backend (this host through sandbox.Open, or an sbx server
// through server/client with --host), calls it and prints the result.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx"

	"github.com/sbxrun/sbx/cmd/sbx/internal/snapshotcmd"
	"github.com/sbxrun/sbx/cmd/sbx/internal/volumecmd"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/internal/completion"
	"github.com/sbxrun/sbx/runc"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/client"
)

// Exit codes of the sandbox commands besides those of sbx.Exit*:
// 1 when the sandbox does not exist or is in the wrong state, as docker.
const exitNoSuchSandbox = 1

func main() {
	// libcontainer re-executes this binary to set each sandbox up; there
	// Init takes over and never returns.
	sandbox.Init()
	runc.Dispatch(os.Args) // "sbx runc ..." and "sbx-runc ..." (a symlink) run and exit here
	os.Exit(execute(os.Args[1:]))
}

// commands lists every command of sbx, in one place.
func commands(a *app) []*cobra.Command {
	return append(snapshotcmd.Commands(func(fn func(context.Context, any) error) error {
		return a.withBackend(func(ctx context.Context, b backend) error { return fn(ctx, b) })
	}), // checkpoint, restore, fork, snapshot
		volumecmd.Command(func(fn func(context.Context, any) error) error {
			return a.withBackend(func(ctx context.Context, b backend) error { return fn(ctx, b) })
		}),
		// One-shot and long-lived sandboxes.
		runCmd(a), createCmd(a), execCmd(a), shellCmd(a), cpCmd(a),
		listCmd(a, "ps"), listCmd(a, "ls"), inspectCmd(a), statsCmd(a),
		eachCmd(a, "pause", "Freeze every process of sandboxes (cgroup freezer)", (sbx.Sandboxes).Pause),
		withAliases(eachCmd(a, "resume", "Thaw paused sandboxes", (sbx.Sandboxes).Resume), "unpause"),
		eachCmd(a, "start", "Start stopped sandboxes again on their kept root", (sbx.Sandboxes).Start),
		stopCmd(a), rmCmd(a), commitCmd(a), prepareCmd(a), poolCmd(a), diffCmd(a), renameCmd(a),
		logsCmd(a), waitCmd(a), killCmd(a), restartCmd(a), portCmd(a), topCmd(a), exportCmd(a), eventsCmd(a),
		// Images.
		pullCmd(a), importCmd(a), imagesCmd(a, "images"), rmiCmd(a, "rmi"), imageCmd(a),
		tagCmd(a), saveCmd(a), loadCmd(a), historyCmd(a), buildCmd(a),
		// The host.
		infoCmd(a), systemCmd(a), gcCmd(a), networkCmd(a), serveCmd(a), benchCmd(a), versionCmd(), manCmd(),
		// Front-ends of other systems.
		openhandsCmd(a),
		// Run by sbx itself, hidden.
		executorCmd(), expiryWatcherCmd(a), autoRemoverCmd(a), egressdCmd(a),
	)
}

// withAliases gives cmd further names (docker's spellings).
func withAliases(cmd *cobra.Command, aliases ...string) *cobra.Command {
	cmd.Aliases = append(cmd.Aliases, aliases...)
	return cmd
}

// app holds the global flags and the backend every command uses: this
// host, or the sbx server of --host. It is chosen once per process.
type app struct {
	root, runRoot, logLevel, host string

	backend backend
	local   *sandbox.Host
}

// backend is what the commands call: the contract's two interfaces.
type backend interface {
	sbx.Sandboxes
	sbx.Images
}

// open returns the backend: the server of --host (SBX_HOST) when one is
// given, else this host, opened with cfg's image options.
func (a *app) open(cfg sandbox.HostConfig) (backend, error) {
	if a.backend != nil {
		return a.backend, nil
	}
	if a.host != "" {
		c, err := client.NewFromEnv(a.host)
		if err != nil {
			return nil, err
		}
		a.backend = c
		return c, nil
	}
	cfg.Root, cfg.RunRoot = a.root, a.runRoot
	if exe, err := os.Executable(); err == nil {
		cfg.EgressCommand = a.selfArgv(exe, "egressd")
	}
	if err := cfg.ReadEnv(); err != nil {
		return nil, err
	}
	h, err := sandbox.Open(cfg)
	if err != nil {
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("%s (%w)", notRoot, err)
		}
		return nil, err
	}
	a.backend, a.local = h, h
	return h, nil
}

// notRoot says why sbx cannot run sandboxes for an unprivileged user and
// what to do instead.
const notRoot = "sbx needs root on this host: it creates namespaces, cgroups, overlay mounts and network devices and keeps its state under --root; " +
	"run it as root (sudo sbx ...), or use an sbx server that runs as root (--host or SBX_HOST). " +
	"Running without root would need user namespaces with delegated id ranges, a delegated cgroup subtree and user-mode networking, which sbx does not do"

// backendCtx opens the backend (with no image options) and a context that
// SIGINT and SIGTERM cancel.
func (a *app) backendCtx() (context.Context, backend, context.CancelFunc, error) {
	b, err := a.open(sandbox.HostConfig{})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := console.SignalContext()
	return ctx, b, cancel, nil
}

// localHost returns this host for commands that act on it only; with
// --host they refuse rather than silently act locally.
func (a *app) localHost(cmd *cobra.Command, cfg sandbox.HostConfig) (*sandbox.Host, error) {
	if a.host != "" {
		return nil, exitErr("sbx %s acts on this host only and does not take --host (or SBX_HOST)", strings.TrimPrefix(cmd.CommandPath(), "sbx "))
	}
	if _, err := a.open(cfg); err != nil {
		return nil, err
	}
	return a.local, nil
}

// hotCommands are the commands scripts and benchmarks start sbx for once
// per sandbox or per command. When the arguments name one, the tree holds
// it alone: building all of them (flag sets, help) costs a millisecond,
// more than a third of sbx's own work before a run's sandbox starts. Each
// is the same command as in the whole tree (TestHotCommandsAsInTree).
var hotCommands = map[string]func(*app) *cobra.Command{
	"run": runCmd, "create": createCmd, "exec": execCmd, "rm": rmCmd, "inspect": inspectCmd,
	"version": func(*app) *cobra.Command { return versionCmd() },
}

// commandName returns the command args name: the first argument after
// root's persistent flags and their values, or "" when there is none or
// a flag is not root's.
func commandName(root *cobra.Command, args []string) string {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" {
			return ""
		}
		if !strings.HasPrefix(arg, "-") {
			return arg
		}
		var f *pflag.Flag
		inline := strings.Contains(arg, "=")
		if name, ok := strings.CutPrefix(arg, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			f = root.PersistentFlags().Lookup(name)
		} else {
			f = root.PersistentFlags().ShorthandLookup(arg[1:2])
			inline = len(arg) > 2
		}
		if f == nil {
			return ""
		}
		if f.NoOptDefVal == "" && !inline {
			i++ // the flag's value
		}
	}
	return ""
}

// newRootCmd builds the command tree of one invocation of args: every
// command, or the one of hotCommands that args name.
func newRootCmd(a *app, args []string) *cobra.Command {
	root := newRoot(a)
	if build, ok := hotCommands[commandName(root, args)]; ok {
		root.AddCommand(build(a))
	} else {
		root.AddCommand(commands(a)...)
	}
	completion.Add(root, func() (completion.Backend, error) { return a.open(sandbox.HostConfig{}) })
	return root
}

// newRoot builds the root command with its persistent flags, and no
// commands.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "sbx",
		Short:         "Run untrusted code in fast, isolated Linux sandboxes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
				return fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", a.logLevel)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.root, "root", envOr("SBX_ROOT", "/var/lib/sbx"), "directory for persistent state (images, sandboxes)")
	pf.StringVar(&a.runRoot, "run-root", envOr("SBX_RUN_ROOT", "/run/sbx"), "directory for runtime state (mounts, sockets)")
	pf.StringVar(&a.logLevel, "log-level", envOr("SBX_LOG_LEVEL", "warn"), "log level: debug, info, warn, error")
	pf.StringVarP(&a.host, "host", "H", os.Getenv("SBX_HOST"),
		"act on the sbx server at this address instead of local state: unix:///path, http(s)://host:port (token from SBX_TOKEN or SBX_TOKEN_FILE)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: sbx.ExitSbxFailed, msg: fmt.Sprintf("%v\nSee '%s --help'.", err, c.CommandPath())}
	})
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// execute runs the CLI with args, its output on stdout and stderr, and
// returns the process exit code. A run passes the signals sbx receives on
// to its sandbox: their registration, about a millisecond, starts here
// and overlaps building the command and parsing its flags.
func execute(args []string) int {
	if commandName(newRoot(&app{}), args) == "run" {
		console.PrepareForwardSignals()
	}
	return executeTo(args, os.Stdin, os.Stdout, os.Stderr)
}

func executeTo(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{}
	root := newRootCmd(a, args)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if a.local != nil {
		_ = a.local.Close()
	}
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "sbx:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "sbx:", err)
	return sbx.ExitSbxFailed
}

// exitError carries a process exit code out of a command. A zero-length
// message means the code is the command's own and nothing is printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitWith returns an error that makes sbx exit with code, printing nothing.
func exitWith(code int) error { return &exitError{code: code} }

// exitErr is an sbx failure (exit 125) with a message.
func exitErr(format string, args ...any) error {
	return &exitError{code: sbx.ExitSbxFailed, msg: fmt.Sprintf(format, args...)}
}

// sbxError maps a backend error to sbx's exit codes: 1 when the sandbox
// or file does not exist or is in the wrong state, else 125.
func sbxError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	code := sbx.ExitSbxFailed
	for _, e := range []error{sbx.ErrNotFound, sbx.ErrState, sbx.ErrAmbiguous, sbx.ErrNoSuchFile} {
		if errors.Is(err, e) {
			code = exitNoSuchSandbox
		}
	}
	return &exitError{code: code, msg: err.Error()}
}
