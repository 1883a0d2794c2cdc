package executor

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sbxrun/sbx/internal/procguard"
	"github.com/sbxrun/sbx/internal/sigreset"
	"github.com/sbxrun/sbx/seccomp/bpfload"
)

// memoryLimit is the executor's soft heap limit: its memory counts against
// the sandbox's, and output is capped anyway.
const memoryLimit = 32 << 20

// maxEnvBytes caps the environment read from --env-fd.
const maxEnvBytes = 1 << 20

// Exit codes of Main.
const (
	exitOK     = 0
	exitFailed = 125 // bad arguments or the executor could not start
)

// Main is the executor's command line, the arguments after the "executor"
// subcommand of the sbx-executor binary (and of "sbx executor"):
//
//	[--listen-fd N | --socket PATH] [--seccomp-fd N] [--env-fd N]
//	[--claim-defaults-fd N]
//	[--user U] [--env K=V]... [--workdir DIR] [--scratch-dir DIR]
//	[--output-budget BYTES] [--stop-timeout D] [--log-level L]
//
// It loads the seccomp filter first, then serves until SIGTERM or SIGINT,
// and returns the process exit code.
func Main(args []string) int {
	o, err := parseArgs(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "sbx executor:", err)
		}
		return exitFailed
	}
	if err := serve(o); err != nil {
		fmt.Fprintln(os.Stderr, "sbx executor:", err)
		return exitFailed
	}
	return exitOK
}

// options are Main's parsed flags.
type options struct {
	listenFD     int
	seccompFD    int
	envFD        int
	defaultsFD   int
	socket       string
	user         string
	env          []string
	workdir      string
	scratchDir   string
	stopTimeout  time.Duration
	outputBudget int64
	logLevel     slog.Level
}

// envFlags collects repeated --env flags.
type envFlags []string

func (e *envFlags) String() string { return strings.Join(*e, ",") }

func (e *envFlags) Set(kv string) error {
	if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
		return fmt.Errorf("%q must be KEY=VALUE", kv)
	}
	*e = append(*e, kv)
	return nil
}

func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("sbx executor", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.IntVar(&o.listenFD, "listen-fd", -1, "file descriptor of a listening unix socket to serve on")
	fs.IntVar(&o.seccompFD, "seccomp-fd", -1, "load the seccomp filter read from this fd before serving")
	fs.StringVar(&o.socket, "socket", "", "path of a unix socket to create and serve on")
	fs.StringVar(&o.user, "user", "", "default user of commands: name, uid or uid:gid (default: the executor's)")
	fs.Var((*envFlags)(&o.env), "env", "default environment variable of commands, KEY=VALUE (repeatable)")
	fs.IntVar(&o.envFD, "env-fd", -1, "read more default environment variables (NUL-separated KEY=VALUE) from this fd, so that they do not show in ps")
	fs.IntVar(&o.defaultsFD, "claim-defaults-fd", -1, "an empty file into which the host writes the defaults (JSON: env, workdir, user) of the sandbox that claims this warm pool member; they apply from the next request on")
	fs.StringVar(&o.workdir, "workdir", "/", "default working directory of commands")
	fs.StringVar(&o.scratchDir, "scratch-dir", "", "directory for session command files (default: a new one under /tmp)")
	fs.Int64Var(&o.outputBudget, "output-budget", DefaultOutputBudget, "bytes of output held for all running commands and sessions together; past it output is truncated")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 5*time.Second, "grace between SIGTERM and SIGKILL of commands at shutdown")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelWarn, "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (o.listenFD >= 0) == (o.socket != "") {
		return o, errors.New("give exactly one of --listen-fd and --socket")
	}
	return o, nil
}

func serve(o options) error {
	// Before anything runs: commands must neither attach to the executor
	// (and replace it) nor inherit the host's descriptors.
	if err := procguard.Apply(); err != nil {
		return err
	}
	sigreset.IgnoredToDefault() // commands start with no signal ignored
	// The filter comes first: everything the executor starts inherits it.
	if o.seccompFD >= 0 {
		if err := bpfload.LoadFromFD(o.seccompFD); err != nil {
			return err
		}
	}
	if o.envFD >= 0 {
		more, err := readEnvFD(o.envFD)
		if err != nil {
			return err
		}
		for _, kv := range more {
			if err := (*envFlags)(&o.env).Set(kv); err != nil {
				return fmt.Errorf("--env-fd: %w", err)
			}
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	// One P: the executor waits on commands and sockets, and the work it
	// does itself is small. A second P only adds thread hand-offs to every
	// request (measured: a third more CPU and 0.1-0.3 ms more per exec),
	// and threads that count against the sandbox's pids limit and memory.
	// sbx sets GOMAXPROCS=1 in the environment of a sandbox's PID 1, which
	// the runtime reads at start: this call, which stops the world after
	// the runtime has started threads for every CPU, is for other callers.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// Signals next: a SIGTERM during start-up must stop cleanly too.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A hangup of a terminal the executor never owns must not stop it. The
	// signal is caught, not ignored: an ignored signal stays ignored in
	// every command the executor starts.
	// So is SIGPIPE: the host stops reading the executor's stdout and
	// stderr once it is ready, and a write to them must then fail, not
	// end the executor.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP, syscall.SIGPIPE)
	go func() {
		for sig := range hup {
			if sig == syscall.SIGHUP { // a log line of SIGPIPE would raise another
				log.Debug("executor: SIGHUP ignored")
			}
		}
	}()
	ln, err := listener(o)
	if err != nil {
		return err
	}
	var claimDefaults *os.File
	if o.defaultsFD >= 0 {
		if claimDefaults = os.NewFile(uintptr(o.defaultsFD), "claim-defaults"); claimDefaults == nil {
			ln.Close()
			return fmt.Errorf("--claim-defaults-fd %d is not an open file descriptor", o.defaultsFD)
		}
	}
	srv, err := New(Config{
		ClaimDefaults: claimDefaults,
		User:          o.user,
		Env:           o.env,
		Workdir:       o.workdir,
		ScratchDir:    o.scratchDir,
		StopTimeout:   o.stopTimeout,
		OutputBudget:  o.outputBudget,
		Logger:        log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	err = srv.Serve(ctx, ln)
	if o.socket != "" {
		os.Remove(o.socket)
	}
	return err
}

func listener(o options) (net.Listener, error) {
	if o.listenFD >= 0 {
		f := os.NewFile(uintptr(o.listenFD), "executor-listener")
		if f == nil {
			return nil, fmt.Errorf("--listen-fd %d is not an open file descriptor", o.listenFD)
		}
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("--listen-fd %d is not a listening socket: %w", o.listenFD, err)
		}
		return ln, nil
	}
	if err := os.Remove(o.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", o.socket, err)
	}
	ln, err := net.Listen("unix", o.socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.socket, err)
	}
	if err := os.Chmod(o.socket, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", o.socket, err)
	}
	return ln, nil
}

// readEnvFD reads NUL-separated KEY=VALUE entries from fd and closes it.
func readEnvFD(fd int) ([]string, error) {
	f := os.NewFile(uintptr(fd), "env")
	if f == nil {
		return nil, fmt.Errorf("--env-fd %d is not an open file descriptor", fd)
	}
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
