package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
)

type runOptions struct {
	sandboxFlags
	images      imageFlags
	entrypoint  string
	interactive bool
	tty         bool
	report      string
	stats       bool
	// docker's spellings: -d starts the command in a long-lived sandbox
	// (sbx create with a command); --rm is what run always does.
	detach, rm    bool
	name          string
	volumes, tmpf []string
	labels        []string
	ttl           time.Duration
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
	o.register(cmd.Flags())
	o.images.register(cmd)
	cmd.Flags().StringVar(&o.pull, "pull", "missing", "pull the image: missing, always or never")
	cmd.Flags().StringVar(&o.entrypoint, "entrypoint", "", "replace the image's entrypoint (and drop its Cmd)")
	cmd.Flags().BoolVarP(&o.interactive, "interactive", "i", false, "keep stdin open and connect it to the command")
	cmd.Flags().BoolVarP(&o.tty, "tty", "t", false, "allocate a terminal for the command")
	cmd.Flags().StringVar(&o.report, "report", "", "write a JSON resource report to this file")
	cmd.Flags().BoolVar(&o.stats, "stats", false, "print a resource report on stderr")
	cmd.Flags().BoolVarP(&o.detach, "detach", "d", false, "start the command in a long-lived sandbox, print its ID and return")
	cmd.Flags().BoolVar(&o.rm, "rm", false, "remove the sandbox when the command exits (what sbx run always does without -d; with -d a background process does it)")
	cmd.Flags().StringVar(&o.name, "name", "", "a unique name for the sandbox (with -d)")
	cmd.Flags().StringArrayVarP(&o.volumes, "volume", "v", nil, "mount a host directory: HOST:CONTAINER[:ro|rw]")
	cmd.Flags().StringArrayVar(&o.tmpf, "tmpfs", nil, "mount an empty tmpfs: CONTAINER[:size=SIZE]")
	cmd.Flags().StringArrayVarP(&o.labels, "label", "l", nil, "set a label: KEY=VALUE (with -d)")
	cmd.Flags().DurationVar(&o.ttl, "ttl", 0, "remove the sandbox this long after its creation (with -d)")
	return cmd
}

func runRun(a *app, cmd *cobra.Command, o *runOptions, args []string) error {
	cfg, err := o.images.hostConfig(a, cmd)
	if err != nil {
		return err
	}
	local := a.host == ""
	opts, err := o.options(local)
	if err != nil {
		return exitErr("%v", err)
	}
	if err := addMounts(&opts, o.volumes, o.tmpf, local); err != nil {
		return exitErr("%v", err)
	}
	hostMode := cmd.Flags().ArgsLenAtDash() == 0
	image := o.rootfs == "" && !hostMode
	cmdArgs := args
	if image {
		if err := dockerargs.CheckImageArg(args[0]); err != nil {
			return exitErr("%v", err)
		}
		opts.Image, cmdArgs = args[0], args[1:]
		if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
			cmdArgs = cmdArgs[1:]
		}
	}
	if !image && len(cmdArgs) == 0 {
		return exitErr("no command given: sbx run --rootfs DIR CMD..., or sbx run -- CMD... in host mode")
	}
	if o.detach {
		return runDetached(a, cmd, o, cfg, opts, cmdArgs)
	}
	if o.name != "" || len(o.labels) > 0 || o.ttl != 0 {
		return exitErr("--name, --label and --ttl are for a sandbox that outlives its command: add -d (sbx run -d --name N IMAGE CMD), or use sbx create")
	}
	b, err := a.open(cfg)
	if err != nil {
		return exitErr("%v", err)
	}
	ro := sbx.RunOptions{Options: opts, Timeout: o.timeout, Tty: o.tty, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	ro.Cmd = cmdArgs
	if image {
		if cmd.Flags().Changed("entrypoint") {
			ro.Entrypoint = []string{}
			if o.entrypoint != "" {
				ro.Entrypoint = []string{o.entrypoint}
			}
		}
		prog := render.NewProgress(cmd.ErrOrStderr(), o.images.quiet || !term.IsTerminal(int(os.Stderr.Fd())))
		defer prog.Finish()
		ro.PullProgress = prog.Update
	}
	if o.interactive {
		ro.Stdin = cmd.InOrStdin()
	}
	if o.tty {
		restore, size, resize := setupTerminal(o.interactive)
		defer restore()
		ro.ConsoleSize, ro.Resize = size, resize
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro.Signals = forwardSignals(ctx, cancel)
	rep, err := b.Run(ctx, ro)
	if err != nil {
		return exitErr("%v", dockerargs.WithImageHint(err, opts.Image))
	}
	if o.report != "" {
		if err := render.WriteReportFile(o.report, rep); err != nil {
			return exitErr("%v", err)
		}
	}
	if o.stats {
		render.Report(cmd.ErrOrStderr(), rep)
	}
	if rep.Status == sbx.RunError && rep.Error != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", rep.Error)
	}
	return exitWith(rep.ExitCode)
}

// runDetached is run -d: a long-lived sandbox whose main command is the
// image's entrypoint with CMD (or the image's Cmd), or CMD with --rootfs
// and in host mode; it prints the sandbox's ID.
func runDetached(a *app, cmd *cobra.Command, o *runOptions, cfg sandbox.HostConfig, opts sbx.Options, cmdArgs []string) error {
	for _, bad := range []string{"interactive", "tty", "report", "stats"} {
		if cmd.Flags().Changed(bad) {
			return exitErr("--%s does not go with -d: the command runs on in the background (follow it with sbx logs -f, wait with sbx wait, remove with sbx rm or --ttl)", bad)
		}
	}
	if o.timeout != 0 {
		return exitErr("--timeout does not go with -d: a detached sandbox's lifetime is --ttl")
	}
	if o.ttl < 0 {
		return exitErr("invalid --ttl %v: must be positive", o.ttl)
	}
	labels, err := dockerargs.ParseLabels(o.labels)
	if err != nil {
		return exitErr("%v", err)
	}
	opts.Name, opts.TTL, opts.Labels, opts.AutoRemove = o.name, o.ttl, labels, o.rm
	b, err := a.open(cfg)
	if err != nil {
		return sbxError(err)
	}
	ctx, cancel := signalContext()
	defer cancel()
	var entrypoint []string
	if cmd.Flags().Changed("entrypoint") {
		entrypoint = []string{}
		if o.entrypoint != "" {
			entrypoint = []string{o.entrypoint}
		}
	}
	opts.Cmd = cmdArgs
	if opts.Image != "" {
		prog := render.NewProgress(cmd.ErrOrStderr(), o.images.quiet || !term.IsTerminal(int(os.Stderr.Fd())))
		opts.Cmd, err = dockerargs.ImageCommand(ctx, b, opts.Image, opts.Pull, entrypoint, cmdArgs, prog.Update)
		prog.Finish()
		if err != nil {
			return sbxError(dockerargs.WithImageHint(err, opts.Image))
		}
	}
	sb, err := b.Create(ctx, opts)
	if err != nil {
		return sbxError(err)
	}
	if a.local != nil && sb.ExpiresAt != nil {
		startExpiryWatcher(a)
	}
	if err := startAutoRemover(a, sb); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
	return nil
}

// setupTerminal puts the user's terminal in raw mode (with -i) and follows
// its size.
func setupTerminal(interactive bool) (restore func(), size [2]uint16, resize chan [2]uint16) {
	restore = func() {}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return restore, [2]uint16{80, 24}, nil
	}
	if w, h, err := term.GetSize(fd); err == nil {
		size = [2]uint16{uint16(w), uint16(h)}
	}
	if interactive {
		if st, err := term.MakeRaw(fd); err == nil {
			restore = func() { _ = term.Restore(fd, st) }
		}
	}
	resize = make(chan [2]uint16, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			if w, h, err := term.GetSize(fd); err == nil {
				select {
				case resize <- [2]uint16{uint16(w), uint16(h)}:
				default:
				}
			}
		}
	}()
	return restore, size, resize
}

// forwardSignals passes the signals sbx receives on to the sandbox. A
// second SIGINT or SIGTERM, or 10 seconds without the command exiting,
// kills the sandbox so that nothing is left behind.
func forwardSignals(ctx context.Context, kill context.CancelFunc) <-chan os.Signal {
	in := make(chan os.Signal, 8)
	out := make(chan os.Signal, 8)
	signal.Notify(in, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		defer signal.Stop(in)
		var grace <-chan time.Time
		terminating := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-grace:
				kill()
				return
			case s := <-in:
				if s == syscall.SIGINT || s == syscall.SIGTERM {
					if terminating {
						kill()
						return
					}
					terminating = true
					grace = time.After(10 * time.Second)
				}
				select {
				case out <- s:
				default:
				}
			}
		}
	}()
	return out
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
