package server

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerRemoteImageInspectGC runs `sbx image inspect` and `sbx image
// gc` with --host against `sbx serve`: inspect prints what a local inspect
// of the server's cache prints, and gc keeps the layers of a stopped
// sandbox whose image was removed, then frees them once it is gone.
func TestServerRemoteImageInspectGC(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	local := t.TempDir()
	sbx := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.Sock}, args...)...)
	}
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "remote/gc:1", fixture.BusyboxImage(t))
	r := sbx("pull", ref)
	if r.Code != 0 {
		t.Fatalf("remote pull: %d %s", r.Code, r.Stderr)
	}

	// inspect: the same JSON as a local inspect of the server's cache;
	// the reference (with / and :) travels URL-escaped.
	r = sbx("image", "inspect", ref)
	var img api.Image
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &img) != nil {
		t.Fatalf("remote image inspect: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.HasSuffix(img.Name, "remote/gc:1") || !strings.HasPrefix(img.Digest, "sha256:") || len(img.LayerDirs) == 0 || len(img.DiffIDs) != len(img.LayerDirs) {
		t.Fatalf("remote image inspect: %+v", img)
	}
	for _, d := range img.LayerDirs {
		if !strings.HasPrefix(d, p.Root+"/") {
			t.Fatalf("layer %s is not in the server's root %s", d, p.Root)
		}
	}
	if lr := harness.RunSbx(t, "", "--root", p.Root, "--run-root", p.RunRoot, "image", "inspect", ref); lr.Code != 0 || lr.Stdout != r.Stdout {
		t.Fatalf("local inspect of the server's cache differs:\nlocal  %s\nremote %s (%s)", lr.Stdout, r.Stdout, lr.Stderr)
	}
	if r = sbx("image", "inspect", reg.Host+"/remote/nosuch:1"); r.Code == 0 || !strings.Contains(r.Stderr, "not") {
		t.Fatalf("remote inspect of an unknown image: %d %s", r.Code, r.Stderr)
	}

	// gc keeps the layers of a stopped sandbox whose image was removed.
	if r = sbx("create", "--name", "keeper", ref); r.Code != 0 {
		t.Fatalf("remote create: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("stop", "-t", "1s", "keeper"); r.Code != 0 {
		t.Fatalf("remote stop: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("rmi", ref); r.Code != 0 {
		t.Fatalf("remote rmi: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("image", "gc"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "removed 0 layers") {
		t.Fatalf("remote image gc with a stopped sandbox on the layers: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, d := range img.LayerDirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("gc removed a layer a stopped sandbox uses: %v", err)
		}
	}
	if r = sbx("start", "keeper"); r.Code != 0 {
		t.Fatalf("remote start after gc: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("exec", "keeper", "--", "ls", "/bin/busybox"); r.Code != 0 {
		t.Fatalf("remote exec after gc: %d %s", r.Code, r.Stderr)
	}
	// Once the sandbox is gone, gc frees them.
	if r = sbx("rm", "-f", "keeper"); r.Code != 0 {
		t.Fatalf("remote rm: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("image", "gc"); r.Code != 0 || strings.HasPrefix(r.Stdout, "removed 0 layers") || !strings.Contains(r.Stdout, "freed") {
		t.Fatalf("remote image gc after the sandbox was removed: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, d := range img.LayerDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("layer %s still there after gc: %v", d, err)
		}
	}
}
