package helperbin

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestInstall(t *testing.T) {
	for _, name := range []string{Init, Executor} {
		if _, err := os.Stat(filepath.Join("bin", name)); err != nil {
			t.Fatalf("no %s to embed: build the helpers first with `make build` (or go generate ./internal/helperbin)", name)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{Init, Executor} {
		p1, err := Install(dir, name)
		if err != nil {
			t.Fatalf("Install(%s): %v", name, err)
		}
		p2, err := Install(dir, name)
		if err != nil || p2 != p1 {
			t.Fatalf("second Install(%s): %q %v, want %q", name, p2, err, p1)
		}
		fi, err := os.Stat(p1)
		if err != nil || fi.Mode().Perm() != 0o555 || !strings.HasPrefix(filepath.Base(p1), name+"-") {
			t.Fatalf("installed %s: %s %v %v", name, p1, fi, err)
		}
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want the 2 helpers", len(entries))
	}
	if _, err := Install(dir, "sbx"); err == nil || errors.Is(err, ErrNotEmbedded) {
		t.Errorf("Install of an unknown helper: %v", err)
	}
}

func TestInstalledHelpersRun(t *testing.T) {
	dir := t.TempDir()
	initPath, err := Install(dir, Init)
	if err != nil {
		t.Fatal(err)
	}
	// As an init outside a sandbox it still runs a command.
	out, err := exec.Command(initPath, "reaper", "--", "echo", "hi").CombinedOutput()
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("sbx-init reaper: %q %v", out, err)
	}
	if err := exec.Command(initPath, "bogus").Run(); err == nil {
		t.Error("sbx-init accepted an unknown subcommand")
	}
	exe, err := Install(dir, Executor)
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(exe, "executor").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "exactly one of --listen-fd and --socket") {
		t.Errorf("sbx-executor executor without a socket: %q %v", out, err)
	}
	out, err = exec.Command(exe, "serve").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "usage: sbx-executor executor") {
		t.Errorf("sbx-executor with an unknown subcommand: %q %v", out, err)
	}
}

// TestHint: a build without helpers is told what to run for where its sbx
// module came from.
func TestHint(t *testing.T) {
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"checkout", &debug.BuildInfo{Main: debug.Module{Path: module}}, "in this checkout of sbx"},
		{"replace", &debug.BuildInfo{Main: debug.Module{Path: "example.com/ci"}, Deps: []*debug.Module{
			{Path: module, Version: "v0.0.0", Replace: &debug.Module{Path: "/src/sbx"}}}}, "run `make helpers` in /src/sbx (the replace of"},
		{"module cache", &debug.BuildInfo{Main: debug.Module{Path: "example.com/ci"}, Deps: []*debug.Module{
			{Path: module, Version: "v0.0.0-20261124000000-0123456789ab"}}}, "v0.0.0-20261124000000-0123456789ab from the module cache carries none"},
		{"unknown", nil, "in the sbx module's directory"},
	} {
		if got := Hint(c.bi); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.name, got, c.want)
		}
	}
}
