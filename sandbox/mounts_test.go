package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// hostMountsUnder lists the mount points of this (the host's) mount
// namespace at or below dir.
func hostMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestSandboxHostMounts: a running sandbox's writable layer's tmpfs and
// overlay root are not mounted on the host but in its own mount namespace
// (every host mount is copied into each new sandbox's mount namespace, so
// each one would make all later creates slower); the host holds that
// namespace's pin only (a mount of a namespace file, which the kernel
// does not copy into new namespaces), before and after a stop and start,
// and nothing after the remove; the host side still reaches the root; the
// executor socket is served from a plain directory the sandbox never sees.
func TestSandboxHostMounts(t *testing.T) {
	m := newHost(t, HostConfig{})
	ctx := context.Background()
	sb, err := m.Create(ctx, busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, sb *sbx.Sandbox) {
		t.Helper()
		if err := m.waitReady(ctx, sb.Socket); err != nil {
			t.Fatalf("%s: executor not answering: %v", when, err)
		}
		want := []string{m.store.RunRoot() + "/" + mountNSDir + "/" + sb.ID}
		if got := hostMountsUnder(t, m.store.RunRoot()); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: host mounts under the run root = %q, want %q", when, got, want)
		}
		// The root is there for the host side, through the namespace.
		if err := m.inMountNS(sb.ID, func() error {
			_, err := os.Stat(sb.RootPath + "/.sbx")
			return err
		}); err != nil {
			t.Errorf("%s: the sandbox's root through its mount namespace: %v", when, err)
		}
		inside, err := os.ReadFile("/proc/" + strconv.Itoa(sb.Pid) + "/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(inside), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], "/.sbx/") && f[4] != "/.sbx/executor" {
				t.Errorf("%s: sandbox has a mount at %s: %s", when, f[4], l)
			}
		}
	}
	check("after create", sb)
	if _, err := m.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	st, err := m.Start(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("after stop and start", st)
	if err := m.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := hostMountsUnder(t, m.store.RunRoot()); len(got) != 0 {
		t.Errorf("mounts left after remove: %q", got)
	}
	if pins, _ := os.ReadDir(m.store.RunRoot() + "/" + mountNSDir); len(pins) != 0 {
		t.Errorf("mount namespace pins left after remove: %v", pins)
	}
}
