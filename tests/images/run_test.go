package images

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/tests/fixture"
)

// imagesExec runs the process an image asks for in its mounted root (a
// chroot with the resolved credentials: what sbx run does with more
// isolation) and returns its output.
func imagesExec(t *testing.T, root string, p imagecache.Process) string {
	t.Helper()
	u, err := rootfs.LookupUser(root, p.User)
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]uint32, 0, len(u.AdditionalGroups))
	for _, g := range u.AdditionalGroups {
		groups = append(groups, uint32(g))
	}
	cmd := &exec.Cmd{
		Path: p.Args[0],
		Args: p.Args,
		Env:  imagecache.EnvWithHome(p.Env, u.Home),
		Dir:  p.Cwd,
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groups},
		},
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("run %v in the image: %v\n%s", p.Args, err, out.String())
	}
	return strings.TrimSpace(out.String())
}

func TestImagesRunHonoursConfig(t *testing.T) {
	reg := fixture.StartRegistry(t)
	layers, _ := fixture.BusyboxImage(t).Layers()
	img := fixture.NewImage(t, v1.Config{
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{`echo "$GREETING $(pwd) $(id -u):$(id -g) $HOME"`},
		Env:        []string{"GREETING=hello", "PATH=/bin:/usr/bin"},
		WorkingDir: "/home/user",
		User:       "user",
	}, layers...)
	ref := reg.Push(t, "run/config:1", img)
	s := imagesStore(t, imagecache.Options{})
	got, err := s.Ensure(context.Background(), ref, imagecache.PullMissing, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := imagesMount(t, got)

	p, err := got.Config.Process(imagecache.ProcessOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	if out := imagesExec(t, root, p); out != "hello /home/user 1000:1000 /home/user" {
		t.Errorf("image config: output %q", out)
	}
	p, err = got.Config.Process(imagecache.ProcessOverrides{
		Cmd:        []string{`echo "$GREETING-$EXTRA $(pwd) $(id -u)"`},
		Env:        []string{"EXTRA=x", "GREETING=bye"},
		WorkingDir: "/tmp",
		User:       "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := imagesExec(t, root, p); out != "bye-x /tmp 0" {
		t.Errorf("overrides: output %q", out)
	}
	p, err = got.Config.Process(imagecache.ProcessOverrides{Entrypoint: []string{"/bin/echo"}, Cmd: []string{"plain"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := imagesExec(t, root, p); out != "plain" {
		t.Errorf("entrypoint override: output %q", out)
	}
}
