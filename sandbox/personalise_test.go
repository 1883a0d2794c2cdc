package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/userns"
)

// claimOne defines pool name (one member, options o), fills it and
// claims its member with c, failing unless the claim took it.
func claimOne(t *testing.T, h *Host, name string, o, c sbx.Options) *sbx.Sandbox {
	t.Helper()
	p := newPool(t, h, name, 1, o)
	sb, err := h.Create(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != p.Ready[0] || sb.FromPool != name {
		t.Fatalf("the create did not claim pool %s's member %s: %+v (timings %+v)", name, p.Ready[0], sb, sb.CreateTimings)
	}
	if sb.CreateTimings == nil || sb.CreateTimings.Pool != "hit, "+name {
		t.Fatalf("create timings of a claim: %+v", sb.CreateTimings)
	}
	return sb
}

// TestClaimPersonalisesHostnameAndMounts: a claim gives the running
// member the create's hostname (its UTS namespace, /etc/hostname and
// /etc/hosts), volumes (read-only and writable, reaching the host
// directory) and a sized tmpfs, seen from inside the sandbox, with
// nosuid and nodev; the pool's own hostname is replaced.
func TestClaimPersonalisesHostnameAndMounts(t *testing.T) {
	h := newHost(t, HostConfig{})
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "hello"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The member's root is its own host range (a private user namespace,
	// the default): the volume it writes lets any user write, as /tmp.
	if err := os.Chmod(rw, 0o1777); err != nil {
		t.Fatal(err)
	}
	base := busybox(t)
	base.Hostname = "idle-member"
	c := busybox(t)
	c.Hostname = "claimed-host"
	c.Env = []string{"TASK=7"}
	c.Volumes = []sbx.Volume{{HostPath: ro, Path: "/data", ReadOnly: true}, {HostPath: rw, Path: "/work/out"}}
	c.Tmpfs = []sbx.Tmpfs{{Path: "/scratch", SizeBytes: 4 << 20}}
	sb := claimOne(t, h, "mounts", base, c)

	if got := execOut(t, h, sb.ID, "hostname"); got != "claimed-host" {
		t.Errorf("hostname inside: %q", got)
	}
	if got := execOut(t, h, sb.ID, "cat", "/etc/hostname"); got != "claimed-host" {
		t.Errorf("/etc/hostname: %q", got)
	}
	if got := execOut(t, h, sb.ID, "cat", "/etc/hosts"); !strings.Contains(got, "claimed-host") || strings.Contains(got, "idle-member") {
		t.Errorf("/etc/hosts:\n%s", got)
	}
	if got := execOut(t, h, sb.ID, "cat", "/data/hello"); got != "from the host" {
		t.Errorf("read-only volume: %q", got)
	}
	res, err := h.Exec(context.Background(), sb.ID, sbx.ExecRequest{Argv: []string{"touch", "/data/new"}}, nil)
	if err != nil || res.ExitCode == 0 {
		t.Errorf("a write to the read-only volume: %+v, %v", res, err)
	}
	execOut(t, h, sb.ID, "sh", "-c", "echo out > /work/out/result")
	if data, err := os.ReadFile(filepath.Join(rw, "result")); err != nil || string(data) != "out\n" {
		t.Errorf("a write to the volume on the host: %q, %v", data, err)
	}
	mounts := execOut(t, h, sb.ID, "cat", "/proc/self/mounts")
	for _, target := range []string{"/data", "/work/out", "/scratch"} {
		line := ""
		for _, l := range strings.Split(mounts, "\n") {
			if f := strings.Fields(l); len(f) > 3 && f[1] == target {
				line = l
			}
		}
		if !strings.Contains(line, "nosuid") || !strings.Contains(line, "nodev") {
			t.Errorf("mount %s inside: %q", target, line)
		}
	}
	if got := execOut(t, h, sb.ID, "df", "-k", "/scratch"); !strings.Contains(got, "4096") {
		t.Errorf("tmpfs size:\n%s", got)
	}
	// Nothing of it is on the host's mount table.
	data, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(data), " /scratch ") || strings.Contains(string(data), rw+" ") {
		t.Errorf("a claim's mount is on the host")
	}
}

// TestClaimMountsIntoReadOnlyRootAndPrivateUserNS: a member with a
// read-only root gets a volume at a path its image lacks (the mountpoint
// is made where the root is writable); a member with a private user
// namespace gets a volume in its own ids (host root's files are not its
// root's, and its root's writes belong to its range), or with idmap=host
// an id-mapped one (host root's files are its root's, and its root's
// writes are host root's).
func TestClaimMountsIntoReadOnlyRootAndPrivateUserNS(t *testing.T) {
	h := newHost(t, HostConfig{})
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o1777); err != nil {
		t.Fatal(err)
	}
	base := busybox(t)
	base.ReadonlyRootfs = true
	c := base
	c.Volumes = []sbx.Volume{{HostPath: vol, Path: "/not/in/image"}}
	sb := claimOne(t, h, "readonly", base, c)
	if got := execOut(t, h, sb.ID, "cat", "/not/in/image/f"); got != "x" {
		t.Errorf("volume in a read-only root: %q", got)
	}
	res, _ := h.Exec(context.Background(), sb.ID, sbx.ExecRequest{Argv: []string{"touch", "/rootfile"}}, nil)
	if res.ExitCode == 0 {
		t.Error("the root became writable")
	}

	// A private user namespace's root must be able to reach its root.
	if err := os.Chmod(filepath.Dir(h.store.Root()), 0o711); err != nil {
		t.Fatal(err)
	}
	base = busybox(t)
	base.UserNS = sbx.UserNSPrivate
	for _, idmap := range []string{"", sbx.VolumeIDMapHost} {
		c = base
		c.Volumes = []sbx.Volume{{HostPath: vol, Path: "/vol", IDMap: idmap}}
		sb = claimOne(t, h, "userns"+idmap, base, c)
		wantOwner, made := "65534", "by-sandbox"+idmap
		if idmap != "" {
			wantOwner = "0"
		}
		if got := execOut(t, h, sb.ID, "stat", "-c", "%u", "/vol/f"); got != wantOwner {
			t.Errorf("idmap %q: a host root's file in the volume is owned by %s inside, want %s", idmap, got, wantOwner)
		}
		execOut(t, h, sb.ID, "touch", "/vol/"+made)
		st, err := os.Stat(filepath.Join(vol, made))
		if err != nil {
			t.Fatalf("idmap %q: the sandbox root's file: %v", idmap, err)
		}
		if idmap == "" && fileUID(st) < userns.DefaultBase || idmap != "" && fileUID(st) != 0 {
			t.Errorf("idmap %q: the sandbox root's file on the host has uid %d", idmap, fileUID(st))
		}
	}
}

// TestClaimMissSaysWhy: a create no pool serves starts cold and its
// create timings say why.
func TestClaimMissSaysWhy(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	sb, err := h.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.CreateTimings.Pool; got != "miss, no pool defined" {
		t.Errorf("no pool: %q", got)
	}
	newPool(t, h, "p", 1, busybox(t))
	unconfined := busybox(t)
	unconfined.Seccomp = "unconfined"
	unconfined.CapDrop = []string{"NET_RAW"}
	for _, tc := range []struct {
		o    sbx.Options
		want string
	}{
		{unconfined, "miss, pool p: cap_drop and seccomp differ"},
		{sbx.Options{Rootfs: t.TempDir()}, "miss, no pool for root directory "},
	} {
		sb, err := h.Create(ctx, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if sb.FromPool != "" || !strings.HasPrefix(sb.CreateTimings.Pool, tc.want) {
			t.Errorf("create timings: %q, want %q", sb.CreateTimings.Pool, tc.want)
		}
		got, _ := h.Get(ctx, sb.ID)
		if got.CreateTimings == nil || got.CreateTimings.Pool != sb.CreateTimings.Pool {
			t.Errorf("inspect's create timings: %+v", got.CreateTimings)
		}
	}
	if sb, err = h.Create(ctx, busybox(t)); err != nil || sb.FromPool != "p" {
		t.Fatalf("claim: %+v, %v", sb, err)
	}
	if sb, err = h.Create(ctx, busybox(t)); err != nil || sb.CreateTimings.Pool != "miss, pool p has no ready member" {
		t.Fatalf("an empty pool: %+v, %v", sb.CreateTimings, err)
	}
}

// TestClaimantsSeeNothingOfEachOther: a claimed member is never handed
// out again, and the next claimant of the pool sees nothing of the
// previous one: environment, files, processes, mounts, hostname.
func TestClaimantsSeeNothingOfEachOther(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	vol := t.TempDir()
	if err := os.Chmod(vol, 0o1777); err != nil { // written by the member's own host range
		t.Fatal(err)
	}
	a := busybox(t)
	a.Env, a.Hostname = []string{"SECRET=first-claimant"}, "first"
	a.Volumes = []sbx.Volume{{HostPath: vol, Path: "/private"}}
	first := claimOne(t, h, "once", busybox(t), a)
	execOut(t, h, first.ID, "sh", "-c", "echo secret > /tmp/left-behind && echo secret > /private/file")
	if _, err := h.Exec(ctx, first.ID, sbx.ExecRequest{Argv: []string{"sleep", "1001"}, Detach: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Remove(ctx, first.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := h.FillPool(ctx, "once")
	if err != nil || len(rep.Started) != 1 {
		t.Fatalf("refill: %+v, %v", rep, err)
	}
	markSeen(h, rep.Started[0])
	second, err := h.Create(ctx, busybox(t))
	if err != nil || second.FromPool != "once" {
		t.Fatalf("second claim: %+v, %v", second, err)
	}
	if second.ID == first.ID {
		t.Fatal("a claimed member was handed out again")
	}
	if env := execOut(t, h, second.ID, "env"); strings.Contains(env, "SECRET") {
		t.Errorf("the next claimant sees the environment:\n%s", env)
	}
	for _, c := range []struct{ cmd, leak string }{
		{"ls -a /tmp; ls /private 2>/dev/null; true", "left-behind"},
		{"ps -o args", "sleep 1001"},
		{"cat /proc/self/mounts", " /private "},
		{"hostname; cat /etc/hostname /etc/hosts", "first"},
	} {
		if out := execOut(t, h, second.ID, "sh", "-c", c.cmd); strings.Contains(out, c.leak) {
			t.Errorf("the next claimant sees the previous one's %q:\n%s", c.leak, out)
		}
	}
}

// TestRunClaimsPoolMember: a one-shot run matching a pool runs in a
// claimed member, personalised, with its report (exit code, output, CPU
// time, timeout, OOM kill), and the member is removed afterwards.
func TestRunClaimsPoolMember(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	p := newPool(t, h, "runs", 3, busybox(t))
	var out bytes.Buffer
	o := sbx.RunOptions{Options: busybox(t), Stdout: &out}
	o.Env = []string{"GREETING=pooled"}
	o.Hostname = "runner"
	o.Cmd = []string{"sh", "-c", "echo $GREETING $(hostname); i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exit 3"}
	rep, err := h.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Timings.Pool != "hit, runs" || rep.ExitCode != 3 || rep.Status != sbx.RunNonzeroExit || out.String() != "pooled runner\n" {
		t.Fatalf("pooled run: %+v, output %q", rep, out.String())
	}
	if rep.CPUTimeS <= 0 || rep.WallTimeS <= 0 || rep.MemoryPeakBytes == 0 {
		t.Errorf("pooled run's usage: %+v", rep)
	}
	for _, id := range p.Ready {
		markSeen(h, id)
	}
	if list, _ := h.List(ctx, sbx.Filter{Pooled: true}); len(list) != 2 {
		t.Fatalf("after a pooled run %d sandboxes are left, want the 2 idle members", len(list))
	}

	o = sbx.RunOptions{Options: busybox(t), Timeout: time.Second}
	o.Cmd = []string{"sleep", "30"}
	if rep, err = h.Run(ctx, o); err != nil || rep.Status != sbx.RunTimeout || !rep.TimedOut || rep.ExitCode != sbx.ExitTimeout || rep.Timings.Pool != "hit, runs" {
		t.Fatalf("pooled run past its timeout: %+v, %v", rep, err)
	}
	o = sbx.RunOptions{Options: busybox(t)}
	o.Limits.MemoryBytes = 32 << 20
	o.Cmd = []string{"sh", "-c", "dd if=/dev/zero of=/dev/null bs=96M count=1"}
	if rep, err = h.Run(ctx, o); err != nil || !rep.OOMKilled || rep.Status != sbx.RunOOM || rep.Timings.Pool != "hit, runs" {
		t.Fatalf("pooled run killed by OOM: %+v, %v", rep, err)
	}
	// An empty pool: cold, and says why.
	o = sbx.RunOptions{Options: busybox(t)}
	o.Cmd = []string{"true"}
	if rep, err = h.Run(ctx, o); err != nil || rep.Status != sbx.RunOK || rep.Timings.Pool != "miss, pool runs has no ready member" {
		t.Fatalf("run from an empty pool: %+v, %v", rep, err)
	}
}

// fileUID is the owner of a file as stat reports it (-1 for none).
func fileUID(fi os.FileInfo) int {
	if fi == nil {
		return -1
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestClaimAppliesUser: the default user is applied at the claim, not
// fixed by the pool: a create asking for user 1000 claims a member of a
// pool without one, and its later commands run as 1000 (a command's own
// user still wins); a create asking for a user the image lacks fails as a
// cold create does (sbx.ErrInvalid naming the user), and the member it
// tried, untouched, stays ready in its pool.
func TestClaimAppliesUser(t *testing.T) {
	h := newHost(t, HostConfig{})
	c := busybox(t)
	c.User = "1000:1000"
	sb := claimOne(t, h, "user", busybox(t), c)
	if got := execOut(t, h, sb.ID, "id", "-u"); got != "1000" {
		t.Errorf("uid of a command after the claim: %q, want 1000", got)
	}
	if got := execOut(t, h, sb.ID, "id", "-g"); got != "1000" {
		t.Errorf("gid of a command after the claim: %q, want 1000", got)
	}
	res, err := h.Exec(context.Background(), sb.ID, sbx.ExecRequest{Argv: []string{"id", "-u"}, User: "0"}, nil)
	if err != nil || strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("a command's own user after the claim: %+v, %v", res, err)
	}

	p := newPool(t, h, "user2", 1, busybox(t))
	bad := busybox(t)
	bad.User = "nosuchuser"
	if sb, err := h.Create(context.Background(), bad); !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "nosuchuser") {
		t.Fatalf("a create with a user the image lacks: %+v, %v; want sbx.ErrInvalid naming the user", sb, err)
	}
	after, err := h.GetPool(context.Background(), "user2")
	if err != nil || !slices.Equal(after.Ready, p.Ready) {
		t.Fatalf("pool after the refused claim: %+v, %v; want its member %v ready", after, err, p.Ready)
	}
}

// TestClaimWithAFileAsWorkdirServesRequests: a claim whose working
// directory the member has as a file gives a sandbox whose executor
// serves requests: a command in another directory runs, one in the
// default directory fails naming it.
func TestClaimWithAFileAsWorkdirServesRequests(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	newPool(t, h, "workdir", 1, busybox(t))
	o := busybox(t)
	o.Workdir = "/bin/sh"
	sb, err := h.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	if sb.FromPool != "workdir" {
		t.Fatalf("the create did not claim the pool's member: from pool %q", sb.FromPool)
	}
	res, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"echo", "ok"}, Cwd: "/"}, nil)
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("exec in /: %+v, %v", res, err)
	}
	if _, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"echo", "ok"}}, nil); err == nil || !strings.Contains(err.Error(), "/bin/sh") {
		t.Fatalf("exec in the default directory, a file: %v; want an error naming /bin/sh", err)
	}
}
