package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestCommandName(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "img", "true"}, "run"},
		{[]string{"--root", "/r", "--run-root=/rr", "run", "--rm", "img"}, "run"},
		{[]string{"-H", "unix:///s", "exec", "id", "ls"}, "exec"},
		{[]string{"-Hunix:///s", "rm", "-f", "id"}, "rm"},
		{[]string{"--log-level", "debug", "--", "run"}, ""},
		{[]string{"--no-such-flag", "run"}, ""},
		{[]string{"--help", "run"}, ""},
		{[]string{"-h"}, ""},
		{[]string{"--root"}, ""},
		{nil, ""},
	} {
		if got := commandName(newRootCmd(&app{}, nil), c.args); got != c.want {
			t.Errorf("commandName(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// TestHotCommandsAsInTree: a tree built for one of the hot commands holds
// that command alone, and it is the one of the whole tree: the same name,
// help, arguments and flags.
func TestHotCommandsAsInTree(t *testing.T) {
	full := newRootCmd(&app{}, nil)
	if len(full.Commands()) < 40 {
		t.Fatalf("the whole tree has %d commands", len(full.Commands()))
	}
	for name := range hotCommands {
		hot := newRootCmd(&app{}, []string{"--root", "/r", name, "x"})
		if n := len(hot.Commands()); n != 1 {
			t.Errorf("the tree of %s has %d commands, want 1", name, n)
			continue
		}
		want, _, err := full.Find([]string{name})
		if err != nil || want.Name() != name {
			t.Errorf("the whole tree has no command %s (%v)", name, err)
			continue
		}
		got := hot.Commands()[0]
		if describe(got) != describe(want) {
			t.Errorf("%s differs from the whole tree's:\n%s\nwant\n%s", name, describe(got), describe(want))
		}
	}
}

// describe renders what a user meets of cmd: its usage with every flag,
// its help text, its aliases and whether it takes arguments as run does.
func describe(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString(cmd.UsageString() + cmd.Long + strings.Join(cmd.Aliases, ",") + "\n")
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		b.WriteString(f.Name + " " + f.Shorthand + " " + f.DefValue + " " + f.NoOptDefVal + " " + f.Value.Type() + "\n")
	})
	return b.String()
}

// TestHotCommandRuns: a hot command parses its flags and runs in its
// own tree, as in the whole one.
func TestHotCommandRuns(t *testing.T) {
	code, out, stderr := runSbx(t, "--root", t.TempDir(), "run", "--help")
	if code != 0 || !strings.Contains(out, "--userns") || !strings.Contains(out, "--run-root") {
		t.Errorf("sbx run --help: exit %d, %s%s", code, out, stderr)
	}
	if code, _, stderr := runSbx(t, "run", "--no-such-flag", "img"); code != 125 || !strings.Contains(stderr, "unknown flag: --no-such-flag") {
		t.Errorf("sbx run --no-such-flag: exit %d, %s", code, stderr)
	}
	if code, out, _ := runSbx(t, "version"); code != 0 || !strings.Contains(out, "sbx") {
		t.Errorf("sbx version: exit %d, %s", code, out)
	}
}
