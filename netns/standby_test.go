package netns

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStandbyHolderTakesClaimedPorts: a pool member attached with a
// standby holder gets its published ports at the claim without a new
// holder: the standby one (same process) takes the sockets, so a host
// process cannot bind the port, and a connection to it reaches the
// sandbox; detach stops it, removes its socket and frees the port.
func TestStandbyHolderTakesClaimedPorts(t *testing.T) {
	e := newTestEnv(t)
	e.attach("sb-other", AttachOptions{})
	before := e.leftovers()
	ctx := context.Background()
	a, err := e.net.Attach(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Standby: true})
	must(t, err)
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	if l.Holder == nil {
		t.Fatal("a standby attach recorded no holder")
	}
	standby := *l.Holder
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(standby.PID) + "/cmdline")
	if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(args) != 4 {
		t.Fatalf("standby holder's command line: %q", args)
	}
	sock := e.net.standbyPath(l)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the standby holder's socket: %v", err)
	}
	e.startBusyboxHTTPD(a.NetNSPath, 8080, "member")

	m, _ := ParsePublish("127.0.0.1:19080:8080")
	got, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	if len(got.Ports) != 1 || got.Ports[0].HostPort != 19080 {
		t.Fatalf("ports after the claim: %+v", got.Ports)
	}
	l, err = e.net.findLease("sb-member", false)
	must(t, err)
	if l.Holder == nil || *l.Holder != standby {
		t.Fatalf("holder after the claim: %+v, want the standby one %+v", l.Holder, standby)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the standby socket after the claim: %v", err)
	}
	bindErr := func() error {
		return InNamespacePath(e.hostNS, func() error {
			ln, err := net.Listen("tcp4", "127.0.0.1:19080")
			if err == nil {
				ln.Close()
			}
			return err
		})
	}
	if err := bindErr(); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("a host process binding the published port: %v, want EADDRINUSE (the holder has it)", err)
	}
	e.expectGet(e.hostNS, "127.0.0.1:19080", "member")

	must(t, e.net.Detach(ctx, "sb-member"))
	if err := unix.Kill(standby.PID, 0); !errors.Is(err, unix.ESRCH) {
		if start, perr := procStart(standby.PID); perr == nil && start == standby.Start {
			t.Fatalf("the standby holder %d runs after detach", standby.PID)
		}
	}
	if err := bindErr(); err != nil {
		t.Fatalf("the port after detach: %v", err)
	}
	if after := e.leftovers(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("left behind:\nbefore %v\nafter  %v", before, after)
	}
}
