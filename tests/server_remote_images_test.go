package tests

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestServerRemoteImageInspectGC runs `sbx image inspect` and `sbx image
// gc` with --host against `sbx serve`: inspect prints what a local inspect
// of the server's cache prints, and gc keeps the layers of a stopped
// sandbox whose image was removed, then frees them once it is gone.
func TestServerRemoteImageInspectGC(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := newServeDirs(t)
	p.start(t)
	defer p.stop(t)
	t.Setenv("SBX_TOKEN", serverTestToken)
	local := t.TempDir()
	sbx := func(args ...string) result {
		return runSbx(t, "", append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.sock}, args...)...)
	}
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "remote/gc:1", fixture.BusyboxImage(t))
	r := sbx("pull", ref)
	if r.code != 0 {
		t.Fatalf("remote pull: %d %s", r.code, r.stderr)
	}

	// inspect: the same JSON as a local inspect of the server's cache;
	// the reference (with / and :) travels URL-escaped.
	r = sbx("image", "inspect", ref)
	var img api.Image
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &img) != nil {
		t.Fatalf("remote image inspect: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if !strings.HasSuffix(img.Name, "remote/gc:1") || !strings.HasPrefix(img.Digest, "sha256:") || len(img.LayerDirs) == 0 || len(img.DiffIDs) != len(img.LayerDirs) {
		t.Fatalf("remote image inspect: %+v", img)
	}
	for _, d := range img.LayerDirs {
		if !strings.HasPrefix(d, p.root+"/") {
			t.Fatalf("layer %s is not in the server's root %s", d, p.root)
		}
	}
	if lr := runSbx(t, "", "--root", p.root, "--run-root", p.runRoot, "image", "inspect", ref); lr.code != 0 || lr.stdout != r.stdout {
		t.Fatalf("local inspect of the server's cache differs:\nlocal  %s\nremote %s (%s)", lr.stdout, r.stdout, lr.stderr)
	}
	if r = sbx("image", "inspect", reg.Host+"/remote/nosuch:1"); r.code == 0 || !strings.Contains(r.stderr, "not") {
		t.Fatalf("remote inspect of an unknown image: %d %s", r.code, r.stderr)
	}

	// gc keeps the layers of a stopped sandbox whose image was removed.
	if r = sbx("create", "--name", "keeper", ref); r.code != 0 {
		t.Fatalf("remote create: %d %s", r.code, r.stderr)
	}
	if r = sbx("stop", "-t", "1s", "keeper"); r.code != 0 {
		t.Fatalf("remote stop: %d %s", r.code, r.stderr)
	}
	if r = sbx("rmi", ref); r.code != 0 {
		t.Fatalf("remote rmi: %d %s", r.code, r.stderr)
	}
	if r = sbx("image", "gc"); r.code != 0 || !strings.HasPrefix(r.stdout, "removed 0 layers") {
		t.Fatalf("remote image gc with a stopped sandbox on the layers: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, d := range img.LayerDirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("gc removed a layer a stopped sandbox uses: %v", err)
		}
	}
	if r = sbx("start", "keeper"); r.code != 0 {
		t.Fatalf("remote start after gc: %d %s", r.code, r.stderr)
	}
	if r = sbx("exec", "keeper", "--", "ls", "/bin/busybox"); r.code != 0 {
		t.Fatalf("remote exec after gc: %d %s", r.code, r.stderr)
	}
	// Once the sandbox is gone, gc frees them.
	if r = sbx("rm", "-f", "keeper"); r.code != 0 {
		t.Fatalf("remote rm: %d %s", r.code, r.stderr)
	}
	if r = sbx("image", "gc"); r.code != 0 || strings.HasPrefix(r.stdout, "removed 0 layers") || !strings.Contains(r.stdout, "freed") {
		t.Fatalf("remote image gc after the sandbox was removed: %d %q %s", r.code, r.stdout, r.stderr)
	}
	for _, d := range img.LayerDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("layer %s still there after gc: %v", d, err)
		}
	}
}
