package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/sbxrun/sbx"
)

type runOptions struct {
	sandboxFlags
	images      imageFlags
	entrypoint  string
	interactive bool
	tty         bool
	report      string
	stats       bool
}

func runCmd(a *app) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] (IMAGE [CMD...] | --rootfs DIR [--] CMD... | [--] CMD...)",
		Short: "Run one command in a fresh sandbox and remove it afterwards",
		Long: `Run one command in a fresh, fully isolated sandbox and tear it down when the
command exits. The root is an image (pulled when missing), a directory given
with --rootfs, or, in host mode, the host's system directories read-only with
a private writable layer on top.

The first argument names an image when it is in the image cache, contains
':', '/' or '@' (busybox:latest, 127.0.0.1:5000/app) or --pull is given;
otherwise it is a host-mode command. "sbx run -- CMD" is always host mode.
"sbx run IMAGE -- CMD" runs CMD in IMAGE.

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
	return cmd
}

func runRun(a *app, cmd *cobra.Command, o *runOptions, args []string) error {
	cfg, err := o.images.hostConfig(a, cmd)
	if err != nil {
		return err
	}
	b, err := a.open(cfg)
	if err != nil {
		return exitErr("%v", err)
	}
	opts, err := o.options(a.host == "")
	if err != nil {
		return exitErr("%v", err)
	}
	ro := sbx.RunOptions{Options: opts, Timeout: o.timeout, Tty: o.tty, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	ro.Cmd = args
	if o.rootfs == "" && isImage(cmd, b, args) {
		ro.Image, ro.Cmd = args[0], args[1:]
		if len(ro.Cmd) > 0 && ro.Cmd[0] == "--" {
			ro.Cmd = ro.Cmd[1:]
		}
		if cmd.Flags().Changed("entrypoint") {
			ro.Entrypoint = []string{}
			if o.entrypoint != "" {
				ro.Entrypoint = []string{o.entrypoint}
			}
		}
		prog := newImageProgress(cmd.ErrOrStderr(), !term.IsTerminal(int(os.Stderr.Fd())))
		defer prog.finish()
		ro.PullProgress = prog.update
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
		return exitErr("%v", err)
	}
	if err := writeReport(o.report, o.stats, rep, cmd.ErrOrStderr()); err != nil {
		return exitErr("%v", err)
	}
	if rep.Status == sbx.RunError && rep.Error != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", rep.Error)
	}
	return exitWith(rep.ExitCode)
}

// isImage decides whether the first argument names an image (see the
// command's help).
func isImage(cmd *cobra.Command, b backend, args []string) bool {
	if cmd.Flags().ArgsLenAtDash() == 0 {
		return false
	}
	ref := args[0]
	if strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		return false
	}
	if cmd.Flags().Changed("pull") || strings.ContainsAny(ref, ":/@") {
		return true
	}
	_, err := b.InspectImage(cmd.Context(), ref)
	return err == nil
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

// writeReport writes the JSON report to path and the human one to w.
func writeReport(path string, human bool, rep *sbx.Report, w io.Writer) error {
	if path != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("write --report: %w", err)
		}
	}
	if human {
		pids := "n/a"
		if rep.PidsPeak != nil {
			pids = fmt.Sprint(*rep.PidsPeak)
		}
		fmt.Fprintf(w, "status: %s  exit: %d  signal: %d\nwall: %.3fs  cpu: %.3fs (user %.3fs, sys %.3fs)\npeak memory: %s  oom killed: %v  timed out: %v  peak pids: %s\n",
			rep.Status, rep.ExitCode, signalNumber(rep.Signal), rep.WallTimeS, rep.CPUTimeS, rep.UserTimeS, rep.SysTimeS,
			units.BytesSize(float64(rep.MemoryPeakBytes)), rep.OOMKilled, rep.TimedOut, pids)
	}
	return nil
}

// signalNumber is the number of a signal name, 0 for none.
func signalNumber(name string) int {
	if name == "" {
		return 0
	}
	return int(unix.SignalNum(name))
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
