package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestNamedVolumes: sbx volume create|ls|inspect|rm|prune, and -v NAME:/path
// as docker has them: a bare name is a named volume (made when missing)
// kept under the state root across sandboxes, in the host's and in a
// private user namespace (its files carry the ids the sandboxes see, so
// what one sandbox wrote another can change), refused removal while a
// sandbox (stopped too) has it, left alone by sbx gc and rm of the
// sandboxes, and gone with its files when removed.
func TestNamedVolumes(t *testing.T) {
	h := harness.NewHost(t)
	if out := h.Must(t, "volume", "create", "--label", "team=a", "data"); out != "data\n" {
		t.Fatalf("volume create: %q", out)
	}
	var infos []sbx.VolumeInfo
	if err := json.Unmarshal([]byte(h.Must(t, "volume", "inspect", "data")), &infos); err != nil || len(infos) != 1 {
		t.Fatalf("volume inspect: %v %v", infos, err)
	}
	mp := infos[0].Mountpoint
	if !strings.HasPrefix(mp, h.Root+"/") || infos[0].Labels["team"] != "a" || infos[0].Created.IsZero() {
		t.Fatalf("volume inspect: %+v", infos[0])
	}

	// Written by one sandbox, read and changed by the next.
	a := h.Create(t, "-v", "data:/data", "--", "sh", "-c", "echo hello > /data/greeting; mkdir /data/sub")
	h.Must(t, "wait", a)
	h.Must(t, "rm", a)
	b := h.Create(t, "--userns", "private", "-v", "data:/data")
	if out := h.Must(t, "exec", b, "--", "sh", "-c", "cat /data/greeting; echo more >> /data/greeting; touch /data/sub/new; stat -c %u /data/greeting"); out != "hello\n0\n" {
		t.Fatalf("a private sandbox reads and changes the volume: %q", out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mp, "sub", "new"), &st); err != nil || st.Uid != 0 {
		t.Fatalf("a file a private sandbox's root made is host uid %d (%v), want 0", st.Uid, err)
	}
	ro := h.Create(t, "-v", "data:/data:ro", "-v", "other:/other")
	if r := h.Sbx(t, "", "exec", ro, "--", "touch", "/data/x"); r.Code == 0 {
		t.Fatal("a read-only named volume took a write")
	}
	if out := h.Must(t, "exec", ro, "cat", "/data/greeting"); out != "hello\nmore\n" {
		t.Fatalf("the volume as the third sandbox sees it: %q", out)
	}

	// In use, running or stopped: not removed.
	if out := h.Must(t, "volume", "ls"); !strings.Contains(out, "local") || !strings.Contains(out, "data") || !strings.Contains(out, b[:12]) || !strings.Contains(out, "other") {
		t.Fatalf("volume ls:\n%s", out)
	}
	h.Must(t, "stop", "-t", "1", b)
	if r := h.Sbx(t, "", "volume", "rm", "data"); r.Code == 0 || !strings.Contains(r.Stderr, "in use") {
		t.Fatalf("volume rm of a volume a stopped sandbox has: %d %s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "volume", "prune"); strings.Contains(out, "data") || strings.Contains(out, "other") {
		t.Fatalf("prune removed a volume in use: %q", out)
	}
	h.Must(t, "rm", "-f", b, ro)
	h.Must(t, "gc")
	if _, err := os.Stat(filepath.Join(mp, "greeting")); err != nil {
		t.Fatalf("the volume's files after the sandboxes' rm and gc: %v", err)
	}

	// Removed only when asked, with its files.
	if out := h.Must(t, "volume", "rm", "data"); out != "data\n" {
		t.Fatalf("volume rm: %q", out)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Fatalf("the volume's directory after rm: %v", err)
	}
	if out := h.Must(t, "volume", "prune"); !strings.Contains(out, "other") {
		t.Fatalf("prune: %q", out)
	}
	if out := h.Must(t, "volume", "ls", "-q"); out != "" {
		t.Fatalf("volumes left: %q", out)
	}
	for _, bad := range [][]string{{"volume", "rm", "nosuch"}, {"volume", "create", "x"}, {"volume", "create", "../up"}, {"create", "--rootfs", "/", "-v", "x:/data"}} {
		if r := h.Sbx(t, "", bad...); r.Code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
	for _, id := range []string{a, b, ro} {
		h.AssertNoLeaksOf(t, id)
	}
}

// TestNamedVolumesOverREST: /v1/volumes through the Go client, and a create
// that names a volume: the server says where it lives, whatever host path
// the request sent beside the name (a server with a strict policy allows
// no host directory at all).
func TestNamedVolumesOverREST(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.C.CreateVolume(ctx, sbx.VolumeSpec{Name: "restvol", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	o := harness.BusyboxCreate("")
	o.Volumes = []sbx.Volume{{Name: "restvol", HostPath: "/etc", Path: "/d"}}
	sb, err := e.C.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	v := sb.Options.Volumes[0]
	if !strings.HasPrefix(v.HostPath, e.Root+"/volumes/restvol/") || v.IDMap != sbx.VolumeIDMapHost {
		t.Fatalf("the record's volume: %+v", v)
	}
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"ls", "-A", "/d"}}, nil)
	if err != nil || res.ExitCode != 0 || res.Stdout != "" {
		t.Fatalf("the new volume as the sandbox sees it: %+v %v", res, err)
	}
	if list, err := e.C.ListVolumes(ctx); err != nil || len(list) != 1 || list[0].Labels["k"] != "v" || len(list[0].UsedBy) != 1 || list[0].UsedBy[0] != sb.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := e.C.RemoveVolume(ctx, "restvol"); !errors.Is(err, sbx.ErrState) {
		t.Fatalf("remove of a volume in use: %v", err)
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if rep, err := e.C.PruneVolumes(ctx); err != nil || len(rep.Removed) != 1 {
		t.Fatalf("prune: %+v %v", rep, err)
	}
	if _, err := e.C.InspectVolume(ctx, "restvol"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("inspect after prune: %v", err)
	}
}
