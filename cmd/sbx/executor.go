package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/executor"
	"github.com/sbxrun/sbx/internal/sigreset"
	"github.com/sbxrun/sbx/seccomp"
)

// executorMemoryLimit is the executor's soft heap limit.
const executorMemoryLimit = 32 << 20

type executorOptions struct {
	listenFD     int
	seccompFD    int
	envFD        int
	socket       string
	user         string
	env          []string
	workdir      string
	scratchDir   string
	stopTimeout  time.Duration
	outputBudget int64
}

func init() {
	var o executorOptions
	cmd := &cobra.Command{
		Use:    "executor",
		Short:  "Run the in-sandbox agent (PID 1 of a long-lived sandbox)",
		Hidden: true,
		Long: `Serve the executor API (commands, shell sessions, files) over HTTP on a unix
socket: the listening socket passed as a file descriptor (--listen-fd, the way
sbx starts it inside a sandbox) or a socket path (--socket). SIGTERM or SIGINT
stops every command, SIGKILL after --stop-timeout, and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExecutor(o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.listenFD, "listen-fd", -1, "file descriptor of a listening unix socket to serve on")
	f.IntVar(&o.seccompFD, "seccomp-fd", -1, "load the seccomp filter read from this fd before serving")
	f.StringVar(&o.socket, "socket", "", "path of a unix socket to create and serve on")
	f.StringVar(&o.user, "user", "", "default user of commands: name, uid or uid:gid (default: the executor's)")
	f.StringArrayVar(&o.env, "env", nil, "default environment variable of commands, KEY=VALUE (repeatable)")
	f.IntVar(&o.envFD, "env-fd", -1, "read more default environment variables (NUL-separated KEY=VALUE) from this fd, so that they do not show in ps")
	f.StringVar(&o.workdir, "workdir", "/", "default working directory of commands")
	f.StringVar(&o.scratchDir, "scratch-dir", "", "directory for session command files (default: a new one under /tmp)")
	f.Int64Var(&o.outputBudget, "output-budget", executor.DefaultOutputBudget, "bytes of output held for all running commands and sessions together; past it output is truncated")
	f.DurationVar(&o.stopTimeout, "stop-timeout", 5*time.Second, "grace between SIGTERM and SIGKILL of commands at shutdown")
	rootCmd.AddCommand(cmd)
}

func runExecutor(o executorOptions) error {
	sigreset.IgnoredToDefault() // commands start with no signal ignored
	if (o.listenFD >= 0) == (o.socket != "") {
		return &exitError{code: exitSbxFailed, msg: "executor: give exactly one of --listen-fd and --socket"}
	}
	if o.envFD >= 0 {
		more, err := readEnvFD(o.envFD)
		if err != nil {
			return &exitError{code: exitSbxFailed, msg: "executor: " + err.Error()}
		}
		o.env = append(o.env, more...)
	}
	for _, kv := range o.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("executor: --env %q must be KEY=VALUE", kv)}
		}
	}
	// The filter comes first: everything the executor starts inherits it.
	if o.seccompFD >= 0 {
		if err := seccomp.LoadFromFD(o.seccompFD); err != nil {
			return fmt.Errorf("executor: %w", err)
		}
	}
	// The executor's memory counts against the sandbox's limit: keep the
	// heap small (a soft limit; output is capped anyway).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(executorMemoryLimit)
	}
	// Signals next: a SIGTERM during start-up must stop cleanly too.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A hangup of a terminal the executor never owns must not stop it. The
	// signal is caught, not ignored: an ignored signal stays ignored in
	// every command the executor starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			slog.Debug("executor: SIGHUP ignored")
		}
	}()
	ln, err := executorListener(o)
	if err != nil {
		return err
	}
	srv, err := executor.New(executor.Config{
		User:         o.user,
		Env:          o.env,
		Workdir:      o.workdir,
		ScratchDir:   o.scratchDir,
		StopTimeout:  o.stopTimeout,
		OutputBudget: o.outputBudget,
		Logger:       slog.Default(),
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("executor: %w", err)
	}
	err = srv.Serve(ctx, ln)
	if o.socket != "" {
		os.Remove(o.socket)
	}
	return err
}

func executorListener(o executorOptions) (net.Listener, error) {
	if o.listenFD >= 0 {
		f := os.NewFile(uintptr(o.listenFD), "executor-listener")
		if f == nil {
			return nil, fmt.Errorf("executor: --listen-fd %d is not an open file descriptor", o.listenFD)
		}
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("executor: --listen-fd %d is not a listening socket: %w", o.listenFD, err)
		}
		return ln, nil
	}
	if err := os.Remove(o.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("executor: remove stale socket %s: %w", o.socket, err)
	}
	ln, err := net.Listen("unix", o.socket)
	if err != nil {
		return nil, fmt.Errorf("executor: listen on %s: %w", o.socket, err)
	}
	if err := os.Chmod(o.socket, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("executor: chmod %s: %w", o.socket, err)
	}
	return ln, nil
}

// maxEnvBytes caps the environment read from --env-fd.
const maxEnvBytes = 1 << 20

// readEnvFD reads NUL-separated KEY=VALUE entries from fd and closes it.
func readEnvFD(fd int) ([]string, error) {
	f := os.NewFile(uintptr(fd), "env")
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEnvBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read --env-fd: %w", err)
	}
	if len(data) > maxEnvBytes {
		return nil, fmt.Errorf("--env-fd: environment larger than %d bytes", maxEnvBytes)
	}
	var env []string
	for _, kv := range strings.Split(string(data), "\x00") {
		if kv != "" {
			env = append(env, kv)
		}
	}
	return env, nil
}
