package sandbox

import (
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
	"github.com/sbxrun/sbx/tests/fixture"
)

// waitForFlockWaiter waits until a process blocks on a flock of the file
// path (a "->" line of /proc/locks naming its inode).
func waitForFlockWaiter(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := fmt.Sprintf(":%d ", fi.Sys().(*syscall.Stat_t).Ino)
	for range 500 {
		data, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "->") && strings.Contains(l, " FLOCK ") && strings.Contains(l, ino) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no process came to wait on %s", path)
}

// TestVolumeRemovedWhileACreateResolvesIt removes a named volume the way
// sbx volume rm does, in the window where a create (cold, or claiming a
// pool member) has resolved the volume but not yet written the record
// naming it: rm sees no user. The create must then never end with a
// sandbox whose volume is gone.
func TestVolumeRemovedWhileACreateResolvesIt(t *testing.T) {
	for _, claim := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "claim"}[claim]
		t.Run(name, func(t *testing.T) { removeVolumeWhileResolved(t, claim) })
	}
}

func removeVolumeWhileResolved(t *testing.T, claim bool) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	if claim {
		newPool(t, m, "warm", 1, busybox(t))
	}
	if _, err := m.CreateVolume(ctx, sbx.VolumeSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	// The create stalls at admission, after resolving its volume.
	adm, err := m.store.Admit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := busybox(t)
	o.Volumes = []sbx.Volume{{Name: "shared", Path: "/data"}}
	if claim {
		// A claim takes the admission lock for a new memory limit.
		o.Limits.MemoryBytes = 96 << 20
	}
	type result struct {
		sb  *sbx.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := m.Create(ctx, o)
		done <- result{sb, err}
	}()
	waitForFlockWaiter(t, filepath.Join(m.store.Root(), "admission.lock"))

	// volume rm: under the volumes' lock, no user yet...
	unlock, err := m.lockVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.InspectVolume(ctx, "shared")
	if err != nil || len(v.UsedBy) > 0 {
		adm.Release()
		unlock()
		t.Fatalf("volume before the record: %+v, %v (want no user)", v, err)
	}
	// ...then the create goes on (as far as it can while rm holds the
	// lock), and the volume is removed.
	adm.Release()
	var r result
	finished := false
	select {
	case r = <-done:
		finished = true
	case <-time.After(3 * time.Second):
	}
	err = m.dropVolume("shared")
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !finished {
		r = <-done
	}
	if r.err != nil {
		t.Logf("create failed: %v", r.err)
		return // cleanly: newHost's cleanup checks nothing leaked
	}
	if claimed := r.sb.FromPool != ""; claimed != claim {
		t.Fatalf("claimed a member: %v, want %v (%+v)", claimed, claim, r.sb.CreateTimings)
	}
	v, err = m.InspectVolume(ctx, "shared")
	if err != nil {
		t.Fatalf("the create made sandbox %s, but its volume is gone: %v", r.sb.ShortID(), err)
	}
	if _, err := m.Exec(ctx, r.sb.ID, sbx.ExecRequest{Argv: []string{"sh", "-c", "echo kept > /data/f"}}, nil); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(v.Mountpoint, "f")); err != nil || string(data) != "kept\n" {
		t.Fatalf("the sandbox's /data is not volume shared: %q, %v", data, err)
	}
}

// TestVolumeRemoveRacesCreates runs creates that name a volume beside
// volume removes of it, a bounded number of times: each rm either removes
// the volume before the create records it (the create makes it again) or
// is refused as in use; no create ends with a sandbox whose volume is gone.
func TestVolumeRemoveRacesCreates(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.Volumes = []sbx.Volume{{Name: "raced", Path: "/data"}}
	for i := range 8 {
		if _, err := m.CreateVolume(ctx, sbx.VolumeSpec{Name: "raced"}); err != nil {
			t.Fatal(err)
		}
		created := make(chan *sbx.Sandbox, 1)
		go func() {
			sb, err := m.Create(ctx, o)
			if err != nil {
				t.Errorf("round %d: create: %v", i, err)
			}
			created <- sb
		}()
		var rmErr error
		for range 50 {
			if rmErr = m.RemoveVolume(ctx, "raced"); rmErr != nil {
				break
			}
			if _, err := m.CreateVolume(ctx, sbx.VolumeSpec{Name: "raced"}); err != nil {
				t.Fatal(err)
			}
		}
		if rmErr != nil && !errors.Is(rmErr, sbx.ErrState) {
			t.Errorf("round %d: volume rm: %v, want removed or in use", i, rmErr)
		}
		sb := <-created
		if sb == nil {
			continue
		}
		v, err := m.InspectVolume(ctx, "raced")
		if err != nil || !slices.Contains(v.UsedBy, sb.ID) {
			t.Fatalf("round %d: sandbox %s made, its volume: %+v %v", i, sb.ShortID(), v, err)
		}
		if _, err := m.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"sh", "-c", "echo " + sb.ID + " > /data/f"}}, nil); err != nil {
			t.Fatal(err)
		}
		if data, err := os.ReadFile(filepath.Join(v.Mountpoint, "f")); err != nil || string(data) != sb.ID+"\n" {
			t.Fatalf("round %d: the sandbox's /data is not the volume: %q %v", i, data, err)
		}
		if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVolumeAndPoolNotFound: an unknown volume or pool is sbx.ErrNotFound
// (404), in words that name what is missing, not "no such sandbox".
func TestVolumeAndPoolNotFound(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	_, inspect := m.InspectVolume(ctx, "nope")
	_, pool := m.GetPool(ctx, "nope")
	for what, err := range map[string]error{"volume inspect": inspect, "volume rm": m.RemoveVolume(ctx, "nope"), "pool": pool} {
		if !errors.Is(err, sbx.ErrNotFound) || strings.Contains(err.Error(), "sandbox") || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s of an unknown name: %v, want a not-found error naming it, not a sandbox", what, err)
		}
	}
}

// TestCheckingMakesNoVolume: a named volume that only a refused create
// names (its working directory a file of the image, a claim with no
// member) is not made; it is made when a sandbox naming it is created.
func TestCheckingMakesNoVolume(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.Volumes = []sbx.Volume{{Name: "late", Path: "/data"}}
	bad := o
	bad.Workdir = "/bin/sh"
	if sb, err := m.Create(ctx, bad); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("create with a working directory that is a file: %+v, %v; want ErrInvalid", sb, err)
	}
	if sb, err := m.Claim(ctx, o, nil); !errors.Is(err, ErrNoMember) {
		t.Fatalf("claim with no pool: %+v, %v; want ErrNoMember", sb, err)
	}
	if v, err := m.InspectVolume(ctx, "late"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("a refused create made its volume: %+v, %v", v, err)
	}
	sb, err := m.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.InspectVolume(ctx, "late")
	if err != nil || !slices.Equal(v.UsedBy, []string{sb.ID}) {
		t.Fatalf("volume of a created sandbox: %+v, %v; want it made, used by %s", v, err, sb.ShortID())
	}
}

// TestFailedCreateDropsTheVolumeItMade: a create that fails once it is
// recorded (here its root directory went away) leaves no volume it made,
// and keeps one that existed before it.
func TestFailedCreateDropsTheVolumeItMade(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	root := fixture.NewBusyboxRootfs(t, filepath.Join(t.TempDir(), "root"))
	if _, err := m.CreateVolume(ctx, sbx.VolumeSpec{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	admitted := m.onAdmit
	m.onAdmit = func(id string) {
		admitted(id)
		if err := os.Rename(root, root+".gone"); err != nil {
			t.Error(err)
		}
	}
	o := sbx.Options{Rootfs: root, Volumes: []sbx.Volume{{Name: "made", Path: "/made"}, {Name: "before", Path: "/before"}}}
	if sb, err := m.Create(ctx, o); err == nil {
		t.Fatalf("create whose root went away: %+v, want an error", sb)
	}
	if v, err := m.InspectVolume(ctx, "made"); !errors.Is(err, sbx.ErrNotFound) {
		t.Errorf("the failed create left the volume it made: %+v, %v", v, err)
	}
	if _, err := m.InspectVolume(ctx, "before"); err != nil {
		t.Errorf("the failed create removed a volume it did not make: %v", err)
	}
}
