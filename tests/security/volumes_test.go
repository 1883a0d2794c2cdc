package security

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/internal/harness"
	"github.com/sbxrun/sbx/userns"
)

// hostileVolume is a host directory handed to a sandbox as a volume: it
// holds a file and a directory of host root (0644, 0755) and is itself
// writable by everyone (sticky, as /tmp), so that what the sandbox may
// create there is decided by ids alone.
func hostileVolume(t *testing.T) string {
	t.Helper()
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "root-file"), []byte("host root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(vol, "root-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o1777); err != nil {
		t.Fatal(err)
	}
	return vol
}

// volumeProbe is what root in the sandbox tries in the volume at /vol,
// naming what it makes after tag: append to host root's file, create in
// host root's directory, take host root's file, plant a setuid-root copy
// of the shell, make a directory with a file.
func volumeProbe(tag string) string {
	return strings.Join([]string{
		"head -n1 /proc/self/uid_map",
		"echo root-file-owner $(stat -c %u /vol/root-file)",
		"(echo planted >> /vol/root-file) 2>/dev/null && echo append-root-file ok || echo append-root-file refused",
		"touch /vol/root-dir/" + tag + " 2>/dev/null && echo create-in-root-dir ok || echo create-in-root-dir refused",
		"chown 0:0 /vol/root-file 2>/dev/null && echo chown-root-file ok || echo chown-root-file refused",
		"cp /bin/sh /vol/suid-" + tag + " && chown 0:0 /vol/suid-" + tag + " && chmod 4755 /vol/suid-" + tag + " && echo suid made",
		"mkdir /vol/dir-" + tag + " && echo made > /vol/dir-" + tag + "/f && echo dir made",
	}, "; ")
}

// probeResults parses volumeProbe's output: the sandbox root's host id
// (from its uid_map) and "NAME RESULT" lines.
func probeResults(t *testing.T, what, out string) (uint32, map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[0])
	if len(f) != 3 || f[0] != "0" {
		t.Fatalf("%s: uid_map %q in:\n%s", what, lines[0], out)
	}
	var id uint32
	fmt.Sscan(f[1], &id)
	got := map[string]string{}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	return id, got
}

// ownerOf is a host file's owner, mode and whether it exists.
func ownerOf(t *testing.T, p string) (uid, gid, mode uint32, ok bool) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return 0, 0, 0, false
	}
	return st.Uid, st.Gid, st.Mode, true
}

// assertVolumeConfined checks what volumeProbe (run as tag in a private
// user namespace, the volume without idmap=host) left in vol on the host:
// host root's files as they were, and everything the sandbox made owned by
// its own range, never a setuid file of host root.
func assertVolumeConfined(t *testing.T, what, out, vol, tag string) {
	t.Helper()
	hostID, got := probeResults(t, what, out)
	rng := userns.Range{HostID: hostID, Size: userns.DefaultSize}
	if hostID < userns.DefaultBase {
		t.Errorf("%s: the sandbox's root is host id %d, not one of a leased range", what, hostID)
	}
	want := map[string]string{
		"root-file-owner":    "65534", // not mapped: the overflow id
		"append-root-file":   "refused",
		"create-in-root-dir": "refused",
		"chown-root-file":    "refused",
		"suid":               "made",
		"dir":                "made",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s gave %q, want %q (output:\n%s)", what, k, got[k], v, out)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(vol, "root-file")); string(data) != "host root's\n" {
		t.Errorf("%s: host root's file in the volume became %q", what, data)
	}
	if uid, gid, _, ok := ownerOf(t, filepath.Join(vol, "root-file")); !ok || uid != 0 || gid != 0 {
		t.Errorf("%s: host root's file now belongs to %d:%d", what, uid, gid)
	}
	if _, _, _, ok := ownerOf(t, filepath.Join(vol, "root-dir", tag)); ok {
		t.Errorf("%s: the sandbox created a file in host root's directory", what)
	}
	for _, name := range []string{"suid-" + tag, "dir-" + tag, "dir-" + tag + "/f"} {
		uid, gid, mode, ok := ownerOf(t, filepath.Join(vol, name))
		switch {
		case !ok:
			t.Errorf("%s: %s was not made", what, name)
		case !rng.Contains(uid) || !rng.Contains(gid):
			t.Errorf("%s: %s belongs to host %d:%d, outside the sandbox's range from %d", what, name, uid, gid, hostID)
		case uid == 0 && mode&unix.S_ISUID != 0:
			t.Errorf("%s: %s is a setuid file of host root", what, name)
		}
	}
	// The setuid bit stays, on a file of the range's root: it runs as
	// that unprivileged host id, never as host root.
	if uid, _, mode, _ := ownerOf(t, filepath.Join(vol, "suid-"+tag)); mode&unix.S_ISUID == 0 || uid != hostID {
		t.Errorf("%s: the sandbox's setuid file: owner %d mode %o, want owner %d with the setuid bit", what, uid, mode&0o7777, hostID)
	}
}

// assertVolumeHostIDs checks the documented effect of idmap=host: host
// root's files are the sandbox root's, which writes as host uid 0.
func assertVolumeHostIDs(t *testing.T, what, out, vol, tag string) {
	t.Helper()
	_, got := probeResults(t, what, out)
	for k, v := range map[string]string{"root-file-owner": "0", "append-root-file": "ok", "create-in-root-dir": "ok", "suid": "made"} {
		if got[k] != v {
			t.Errorf("%s: %s gave %q, want %q (output:\n%s)", what, k, got[k], v, out)
		}
	}
	if uid, _, mode, ok := ownerOf(t, filepath.Join(vol, "suid-"+tag)); !ok || uid != 0 || mode&unix.S_ISUID == 0 {
		t.Errorf("%s: with idmap=host the sandbox's setuid file is owner %d mode %o, want host root's setuid file as documented", what, uid, mode&0o7777)
	}
	if uid, _, _, ok := ownerOf(t, filepath.Join(vol, "root-dir", tag)); !ok || uid != 0 {
		t.Errorf("%s: with idmap=host a file made in host root's directory: owner %d, exists %v", what, uid, ok)
	}
}

// TestAdversarialVolumesInPrivateUserNS: in a private user namespace a
// volume is no way out of the range. Root in the sandbox cannot append to
// host root's file, create in host root's directory, take host root's
// file, or plant a setuid file of host root; what it makes belongs to its
// range on the host; all alike in a one-shot run, a long-lived sandbox
// and a warm pool member given the volume at its claim. A volume given
// idmap=host is id-mapped back to the host's ids, as documented: the
// sandbox's root writes as host root there.
func TestAdversarialVolumesInPrivateUserNS(t *testing.T) {
	root := harness.AdversaryRoot(t)

	vol := hostileVolume(t)
	out := harness.MustRun(t, "run", "--userns", "private", "--rootfs", root, "-v", vol+":/vol", "--", "sh", "-c", volumeProbe("oneshot"))
	assertVolumeConfined(t, "one-shot", out, vol, "oneshot")
	hostVol := hostileVolume(t)
	out = harness.MustRun(t, "run", "--userns", "private", "--rootfs", root, "-v", hostVol+":/vol:idmap=host", "--", "sh", "-c", volumeProbe("oneshot"))
	assertVolumeHostIDs(t, "one-shot, idmap=host", out, hostVol, "oneshot")
	// Without a private user namespace idmap=host changes nothing.
	out = harness.MustRun(t, "run", "--userns", "host", "--rootfs", root, "-v", hostVol+":/vol:ro,idmap=host", "--", "sh", "-c", "stat -c %u /vol/root-file; touch /vol/x 2>/dev/null || echo read-only")
	if out != "0\nread-only\n" {
		t.Errorf("host user namespace, idmap=host and ro: %q", out)
	}

	h := harness.NewHost(t)
	if err := os.Chmod(filepath.Dir(h.Run), 0o711); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(h.Must(t, "create", "--userns", "private", "--rootfs", root, "-v", vol+":/vol"))
	h.Saw(id)
	out = h.Must(t, "exec", id, "--", "sh", "-c", volumeProbe("longlived"))
	assertVolumeConfined(t, "long-lived", out, vol, "longlived")
	h.Must(t, "rm", "-f", id)

	// A warm pool member of a private user namespace, given volumes at
	// its claim (over REST).
	e := harness.NewServerEnv(t, sandbox.HostConfig{Policy: &sbx.Policy{AllowedHostDirs: []string{filepath.Dir(root), vol, hostVol}}}, nil)
	if err := os.Chmod(e.Dir, 0o711); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := sbx.Options{Rootfs: root, UserNS: sbx.UserNSPrivate}
	if _, err := e.Host.CreatePool(ctx, sbx.PoolSpec{Name: "uns", Size: 1, Options: base}); err != nil {
		t.Fatal(err)
	}
	e.WaitPoolReady(t, "uns", 1)
	c := base
	c.Volumes = []sbx.Volume{{HostPath: vol, Path: "/vol"}}
	sb, err := e.C.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.FromPool != "uns" {
		t.Fatalf("the create did not claim the pool's member: %+v", sb.CreateTimings)
	}
	res, err := e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: volumeProbe("claimed")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertVolumeConfined(t, "claimed pool member", res.Stdout, vol, "claimed")
	if _, err := e.Host.FillPool(ctx, "uns"); err != nil {
		t.Fatal(err)
	}
	c.Volumes = []sbx.Volume{{HostPath: hostVol, Path: "/vol", IDMap: sbx.VolumeIDMapHost}}
	sb, err = e.C.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	if sb.FromPool != "uns" {
		t.Fatalf("the create did not claim the pool's member: %+v", sb.CreateTimings)
	}
	res, err = e.C.Exec(ctx, sb.ID, sbx.ExecRequest{Command: volumeProbe("claimed")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertVolumeHostIDs(t, "claimed pool member, idmap=host", res.Stdout, hostVol, "claimed")
}
