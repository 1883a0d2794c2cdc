package run

import (
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRunImage runs images through the CLI: pulled when missing from a
// registry on 127.0.0.1, with their Entrypoint, Cmd, Env, WorkingDir and
// User honoured, and flags overriding them as docker's do.
func TestRunImage(t *testing.T) {
	reg := fixture.StartRegistry(t)
	base := fixture.BusyboxImage(t)
	layers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	img := fixture.NewImage(t, v1.Config{
		Entrypoint: []string{"sh", "-c", `echo "args=$0 $1|env=$GREETING|cwd=$(pwd)|user=$(id -u):$(id -g)|home=$HOME"`},
		Cmd:        []string{"first", "second"},
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GREETING=hello"},
		WorkingDir: "/home/user",
		User:       "user",
	}, layers...)
	ref := reg.Push(t, "test/config:v1", img)
	root := t.TempDir()

	out := harness.MustRun(t, "--root", root, "run", ref)
	if want := "args=first second|env=hello|cwd=/home/user|user=1000:1000|home=/home/user\n"; out != want {
		t.Errorf("image defaults: %q, want %q", out, want)
	}
	out = harness.MustRun(t, "--root", root, "run", "--pull", "never", "-e", "GREETING=bye", "-w", "/tmp", "-u", "0", ref, "x", "y")
	if want := "args=x y|env=bye|cwd=/tmp|user=0:0|home=/root\n"; out != want {
		t.Errorf("overrides: %q, want %q", out, want)
	}
	// "--" after the image separates the command and is not part of it.
	out = harness.MustRun(t, "--root", root, "run", ref, "--", "x", "--", "y")
	if want := "args=x --|env=hello|cwd=/home/user|user=1000:1000|home=/home/user\n"; out != want {
		t.Errorf("IMAGE -- CMD: %q, want %q", out, want)
	}
	out = harness.MustRun(t, "--root", root, "run", "--entrypoint", "id", ref, "-un")
	if out != "user\n" {
		t.Errorf("--entrypoint: %q", out)
	}
	// Cached now: the name alone, without a tag, is the image.
	harness.MustRun(t, "--root", root, "images")
	r := harness.RunSbx(t, "", "--root", root, "run", "--pull", "never", reg.Host+"/test/missing:v1")
	if r.Code != 125 || !strings.Contains(r.Stderr, "is not in the cache and the pull policy is never") {
		t.Errorf("missing image with --pull never: exit %d stderr %q", r.Code, r.Stderr)
	}
	r = harness.RunSbx(t, "", "--root", root, "run", "-u", "nosuchuser", ref)
	if r.Code != 125 || !strings.Contains(r.Stderr, "nosuchuser") {
		t.Errorf("unknown user: exit %d stderr %q", r.Code, r.Stderr)
	}
	harness.AssertNoLeftovers(t)
}
