package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/sandbox"
)

type runOptions struct {
	sandboxFlags
	images      imageFlags
	pull        string
	entrypoint  string
	interactive bool
	tty         bool
	report      string
	stats       bool
}

func init() {
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
			return runRun(cmd, o, args)
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
	rootCmd.AddCommand(cmd)
}

func runRun(cmd *cobra.Command, o *runOptions, args []string) error {
	if remoteHost != "" {
		return runRemote(cmd, o, args)
	}
	spec, err := o.runSpec(args)
	if err != nil {
		return &exitError{code: exitSbxFailed, msg: err.Error()}
	}
	if o.rootfs == "" && o.isImage(cmd, args) {
		release, err := o.useImage(cmd, &spec, args)
		if err != nil {
			return &exitError{code: exitSbxFailed, msg: err.Error()}
		}
		// The image store is held from resolving the image until its
		// overlay is mounted, so that a concurrent image gc cannot remove
		// its layers in between; the mount protects them afterwards.
		var once sync.Once
		spec.RootReady = func() { once.Do(release) }
		defer once.Do(release)
	}
	// The sandbox's init: the small embedded sbx-init, written under
	// --root, not the tmpfs run root: bind-mounting a file from tmpfs costs
	// libcontainer's start several milliseconds here.
	initPath, err := helperbin.Install(filepath.Join(global.root, "helpers"), helperbin.Init)
	if err != nil {
		return &exitError{code: exitSbxFailed, msg: err.Error()}
	}
	spec.Stdout, spec.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
	if o.interactive {
		spec.Stdin = cmd.InOrStdin()
	}
	if o.tty {
		restore, size, resize := setupTerminal(o.interactive)
		defer restore()
		spec.ConsoleSize, spec.Resize = size, resize
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec.Signals = forwardSignals(ctx, cancel)

	runner := &sandbox.Runner{RunRoot: global.runRoot, Init: initPath}
	if spec.Network.Mode == netns.ModeBridge {
		if runner.Network, err = openNetwork(); err != nil {
			return &exitError{code: exitSbxFailed, msg: err.Error()}
		}
		defer runner.Network.Close()
	}
	rep, err := runner.Run(ctx, spec)
	if err != nil {
		return &exitError{code: exitSbxFailed, msg: err.Error()}
	}
	if err := writeReport(o.report, o.stats, rep, cmd.ErrOrStderr()); err != nil {
		return &exitError{code: exitSbxFailed, msg: err.Error()}
	}
	if rep.Status == sandbox.StatusError && rep.Error != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "sbx:", rep.Error)
	}
	return exitWith(rep.ExitCode)
}

// runSpec turns the flags and arguments into a sandbox.RunSpec.
func (o *runOptions) runSpec(args []string) (sandbox.RunSpec, error) {
	var spec sandbox.RunSpec
	limits, err := o.limits()
	if err != nil {
		return spec, err
	}
	disk, err := o.diskBytes()
	if err != nil {
		return spec, err
	}
	network, err := o.networkOptions()
	if err != nil {
		return spec, err
	}
	env, err := o.environ()
	if err != nil {
		return spec, err
	}
	if o.workdir != "" && !filepath.IsAbs(o.workdir) {
		return spec, fmt.Errorf("invalid --workdir %q: must be an absolute path", o.workdir)
	}
	if o.rootfs != "" {
		abs, err := filepath.Abs(o.rootfs)
		if err != nil {
			return spec, err
		}
		fi, err := os.Stat(abs)
		if err != nil || !fi.IsDir() {
			return spec, fmt.Errorf("--rootfs %s is not a directory", o.rootfs)
		}
		spec.Rootfs = abs
	}
	spec.Args = args
	spec.Env = env
	spec.Cwd = o.workdir
	spec.User = o.user
	spec.Hostname = o.hostname
	spec.ReadOnly = o.readOnly
	spec.Seccomp = o.seccomp
	spec.CapAdd, spec.CapDrop = o.capAdd, o.capDrop
	spec.Limits = limits
	spec.DiskBytes = disk
	spec.Network = network
	spec.Timeout = o.timeout
	spec.Tty = o.tty
	return spec, nil
}

// isImage decides whether the first argument names an image (see the
// command's help).
func (o *runOptions) isImage(cmd *cobra.Command, args []string) bool {
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
	store, err := openImageStore(&o.images)
	if err != nil {
		return false
	}
	_, err = store.Resolve(ref)
	return err == nil
}

// useImage resolves (or pulls) the image and makes the spec run its
// process: Entrypoint + Cmd, Env, WorkingDir and User, as docker does. A
// "--" right after the image separates it from the command. It returns
// with the image store held (see imagecache.Store.Hold); the caller
// releases it once the overlay is mounted.
func (o *runOptions) useImage(cmd *cobra.Command, spec *sandbox.RunSpec, args []string) (release func(), err error) {
	policy, err := imagecache.ParsePullPolicy(o.pull)
	if err != nil {
		return nil, err
	}
	store, err := openImageStore(&o.images)
	if err != nil {
		return nil, err
	}
	hold, err := store.Hold(cmd.Context())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			hold()
		}
	}()
	prog := newImageProgress(cmd.ErrOrStderr(), !term.IsTerminal(int(os.Stderr.Fd())))
	img, err := store.Ensure(cmd.Context(), args[0], policy, prog.update)
	prog.finish()
	if err != nil {
		return nil, err
	}
	command := args[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	over := imagecache.ProcessOverrides{Cmd: command, Env: spec.Env, WorkingDir: o.workdir, User: o.user}
	if cmd.Flags().Changed("entrypoint") {
		over.Entrypoint = []string{}
		if o.entrypoint != "" {
			over.Entrypoint = []string{o.entrypoint}
		}
	}
	p, err := img.Config.Process(over)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", args[0], err)
	}
	spec.Lowers = img.LayerDirs
	spec.Args, spec.Env, spec.Cwd, spec.User = p.Args, p.Env, p.Cwd, p.User
	return hold, nil
}

// openNetwork opens the bridge network state shared by every sbx process.
func openNetwork() (*netns.Network, error) {
	subnet, err := subnetFromEnv()
	if err != nil {
		return nil, err
	}
	return netns.Open(netns.Config{
		StateDir: filepath.Join(global.root, "network"),
		RunDir:   filepath.Join(global.runRoot, "netns"),
		Subnet:   subnet,
	})
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
func writeReport(path string, human bool, rep *sandbox.Report, w io.Writer) error {
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
			rep.Status, rep.ExitCode, rep.Signal, rep.WallTimeS, rep.CPUTimeS, rep.UserTimeS, rep.SysTimeS,
			units.BytesSize(float64(rep.MemoryPeakBytes)), rep.OOMKilled, rep.TimedOut, pids)
	}
	return nil
}
