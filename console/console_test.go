package console

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestWithTERM(t *testing.T) {
	t.Setenv("TERM", "xterm-256color")
	if env := WithTERM(nil); len(env) != 1 || env[0] != "TERM=xterm-256color" {
		t.Errorf("nil env: %v", env)
	}
	if env := WithTERM([]string{"TERM=dumb"}); len(env) != 1 || env[0] != "TERM=dumb" {
		t.Errorf("the caller's TERM lost: %v", env)
	}
	t.Setenv("TERM", "")
	if env := WithTERM(nil); env != nil {
		t.Errorf("no TERM here: %v", env)
	}
}

func TestNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) || IsTerminal(nil) {
		t.Error("a file, a buffer or nil taken for a terminal")
	}
	// Confirm never asks where nobody can answer.
	var out bytes.Buffer
	if Confirm(strings.NewReader("y\n"), &out, "Sure?") || out.Len() != 0 {
		t.Errorf("confirmed from a non-terminal: %q", out.String())
	}
}
