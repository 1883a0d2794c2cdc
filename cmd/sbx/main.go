// Command sbx runs untrusted code in Linux sandboxes: namespaces, cgroups
// and seccomp, started directly with libcontainer, without a daemon.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/isolate"
)

// Exit codes of sbx itself, following docker and podman.
const (
	exitSbxFailed  = 125 // sbx itself failed
	exitCannotExec = 126 // the command could not be executed
	exitNotFound   = 127 // the command was not found
)

// exitError carries a process exit code out of a command. A zero-length
// message means the code is the command's own and nothing is printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitWith returns an error that makes sbx exit with code, printing nothing.
func exitWith(code int) error { return &exitError{code: code} }

// globalOptions are the flags every command shares.
type globalOptions struct {
	root     string
	runRoot  string
	logLevel string
}

var global globalOptions

var rootCmd = &cobra.Command{
	Use:           "sbx",
	Short:         "Run untrusted code in fast, isolated Linux sandboxes",
	SilenceUsage:  true,
	SilenceErrors: true,
	PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
		var level slog.Level
		if err := level.UnmarshalText([]byte(global.logLevel)); err != nil {
			return fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", global.logLevel)
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
		return cgroup.ValidateParentEnv()
	},
}

func init() {
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&global.root, "root", envOr("SBX_ROOT", "/var/lib/sbx"), "directory for persistent state (images, sandboxes)")
	pf.StringVar(&global.runRoot, "run-root", envOr("SBX_RUN_ROOT", "/run/sbx"), "directory for runtime state (mounts, sockets)")
	pf.StringVar(&global.logLevel, "log-level", envOr("SBX_LOG_LEVEL", "warn"), "log level: debug, info, warn, error")
	rootCmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("%v\nSee '%s --help'.", err, c.CommandPath())}
	})
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	// libcontainer re-executes this binary to set each sandbox up; there
	// Init takes over and never returns.
	isolate.Init()
	os.Exit(execute(os.Args[1:]))
}

// execute runs the CLI with args and returns the process exit code.
func execute(args []string) int {
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "sbx:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "sbx:", err)
	return exitSbxFailed
}
