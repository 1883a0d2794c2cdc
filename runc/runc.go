// Package runc is sbx's runc-compatible command set: containerd's runc shim
// (io.containerd.runc.v2 with BinaryName) and CRI-O run pod containers with
// it as they run runc. It takes an OCI bundle in and leaves a container
// out, through isolate and cgroup like every sbx sandbox, and adds sbx's
// protections where the bundle's config.json leaves room (isolate.Harden).
// It is reached as "sbx runc ..." and as sbx invoked under the name
// sbx-runc; it does not go through the sbx contract: it serves a
// container manager, not sbx users.
//
// The program that calls Main must call sandbox.Init (isolate.Init) first
// in main: libcontainer re-executes it as "sbx-runc init" to set each
// container up.
package runc

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxrun/sbx/isolate"
)

// DefaultRoot is where container state lives without --root (runc's is
// /run/runc).
const DefaultRoot = "/run/sbx-runc"

// globals are runc's global flags.
type globals struct {
	root, log, logFormat, rootless, criu string
	debug, systemdCgroup                 bool
	logFile                              io.Writer
}

// commands are the supported subcommands.
var commands = map[string]func(g *globals, args []string) error{
	"create":   cmdCreate,
	"start":    cmdStart,
	"state":    cmdState,
	"exec":     cmdExec,
	"kill":     cmdKill,
	"delete":   cmdDelete,
	"pause":    cmdPause,
	"resume":   cmdResume,
	"update":   cmdUpdate,
	"ps":       cmdPs,
	"features": cmdFeatures,
}

// usages are the subcommands' synopses.
var usages = map[string]string{
	"create":   "create [--bundle DIR] [--pid-file FILE] [--console-socket SOCK] [--no-pivot] [--no-new-keyring] [--preserve-fds N] ID",
	"start":    "start ID",
	"state":    "state ID",
	"exec":     "exec [--process FILE | ARGS...] [--detach] [--pid-file FILE] [--console-socket SOCK] [--tty] [--cwd DIR] [--env K=V] [--user UID[:GID]] ID [ARGS...]",
	"kill":     "kill [--all] ID [SIGNAL]",
	"delete":   "delete [--force] ID",
	"pause":    "pause ID",
	"resume":   "resume ID",
	"update":   "update --resources FILE|- ID",
	"ps":       "ps [--format table|json] ID",
	"features": "features",
}

// Main runs one runc command line, the arguments after "sbx runc" (or
// after "sbx-runc"), and returns its exit status: 0, or 1 with the error
// printed to stderr and, with --log, logged there (as JSON lines with
// --log-format json, the form containerd's shim reads its errors from).
// "exec" without --detach returns the status of the process it ran.
func Main(args []string) int {
	g := &globals{logFile: io.Discard}
	fs := flag.NewFlagSet("sbx-runc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.root, "root", DefaultRoot, "directory of the containers' state")
	fs.StringVar(&g.log, "log", "", "file to log errors to")
	fs.StringVar(&g.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&g.rootless, "rootless", "auto", "only auto or false: sbx-runc runs as root")
	fs.StringVar(&g.criu, "criu", "", "unused: checkpoint is not supported")
	fs.BoolVar(&g.debug, "debug", false, "accepted for compatibility")
	fs.BoolVar(&g.systemdCgroup, "systemd-cgroup", false, "not supported")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return fail(g, fmt.Errorf("%w\n%s", err, usage()))
	}
	// create changes to the bundle's directory: a relative root must not
	// move with it.
	if root, err := filepath.Abs(g.root); err == nil {
		g.root = root
	}
	if g.log != "" {
		f, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_SYNC, 0o644)
		if err != nil {
			return fail(g, fmt.Errorf("open log file: %w", err))
		}
		defer f.Close()
		g.logFile = f
	}
	if g.logFormat != "text" && g.logFormat != "json" {
		return fail(g, fmt.Errorf("unknown log-format %q (text or json)", g.logFormat))
	}
	if g.log != "" {
		isolate.LogTo(g.logFile, g.logFormat == "json")
	}
	if g.systemdCgroup {
		return fail(g, errors.New("the systemd cgroup driver is not supported: set SystemdCgroup = false in containerd's runtime options and cgroupDriver: cgroupfs in the kubelet's configuration"))
	}
	if g.rootless != "auto" && g.rootless != "false" {
		return fail(g, fmt.Errorf("--rootless %s is not supported: sbx-runc runs as root", g.rootless))
	}
	if fs.NArg() == 0 {
		return fail(g, errors.New("no command given\n"+usage()))
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "--version" || name == "version" || name == "-v" {
		fmt.Printf("sbx-runc version %s\nspec: %s\n", "sbx", specVersion())
		return 0
	}
	run, ok := commands[name]
	if !ok {
		return fail(g, fmt.Errorf("command %q is not supported by sbx-runc\n%s", name, usage()))
	}
	if err := run(g, rest); err != nil {
		var st exitStatus
		if errors.As(err, &st) {
			return int(st)
		}
		code := fail(g, err)
		var ce codedError
		if errors.As(err, &ce) {
			code = ce.code
		}
		return code
	}
	return 0
}

// exitStatus is the status of a process exec ran in the foreground: Main
// returns it without reporting an error.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// codedError is an error that exits with its own status (runc's exec
// exits 255 when it cannot run the process).
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// usage lists the commands.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: sbx-runc [--root DIR] [--log FILE] [--log-format text|json] COMMAND\ncommands:\n")
	for _, n := range []string{"create", "start", "state", "exec", "kill", "delete", "pause", "resume", "update", "ps", "features"} {
		b.WriteString("  " + usages[n] + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fail reports err as runc does (stderr, and the log file as an error
// entry) and returns exit status 1.
func fail(g *globals, err error) int {
	msg := err.Error()
	fmt.Fprintln(os.Stderr, msg)
	if g.logFormat == "json" {
		line, _ := json.Marshal(struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Time  string `json:"time"`
		}{"error", msg, time.Now().Format(time.RFC3339Nano)})
		fmt.Fprintf(g.logFile, "%s\n", line)
	} else {
		fmt.Fprintf(g.logFile, "time=%q level=error msg=%q\n", time.Now().Format(time.RFC3339Nano), msg)
	}
	return 1
}

// newFlags returns a flag set for a subcommand, quiet on its own.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses a subcommand's flags and checks its number of positional
// arguments (max < 0: any number).
func parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w\nusage: sbx-runc %s", fs.Name(), err, usages[fs.Name()])
	}
	if fs.NArg() < minArgs || (maxArgs >= 0 && fs.NArg() > maxArgs) {
		if fs.NArg() == 0 && minArgs > 0 {
			return errors.New("container id cannot be empty")
		}
		return fmt.Errorf("%s: wrong number of arguments\nusage: sbx-runc %s", fs.Name(), usages[fs.Name()])
	}
	return nil
}

// Dispatch runs the command line args (os.Args) and exits the program when
// it invokes this command set: the program runs under the name sbx-runc
// (a symlink to sbx), or its first argument is "runc". Otherwise it
// returns at once. Call it right after sandbox.Init in main.
func Dispatch(args []string) {
	switch {
	case len(args) > 0 && filepath.Base(args[0]) == "sbx-runc":
		os.Exit(Main(args[1:]))
	case len(args) > 1 && args[1] == "runc":
		os.Exit(Main(args[2:]))
	}
}
