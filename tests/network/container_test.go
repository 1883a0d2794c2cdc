package network

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestNetnsContainerJoinsBridge starts a real sandbox (libcontainer through
// isolate) in a namespace prepared by netns, inside a test namespace that
// plays the host and a second one that plays the internet: the sandbox sees
// its address, reaches the web server through NAT, is kept from the metadata
// address and gets resolv.conf and hosts from the Attachment.
func TestNetnsContainerJoinsBridge(t *testing.T) {
	dir := t.TempDir()
	hostNS, inetNS := filepath.Join(dir, "host"), filepath.Join(dir, "inet")
	for _, p := range []string{hostNS, inetNS} {
		if err := netns.CreateNamespace(p, netnsLoUp); err != nil {
			t.Fatalf("create test namespace: %v", err)
		}
		t.Cleanup(func() { netns.RemoveNamespace(p) })
	}
	inetFile, err := os.Open(inetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer inetFile.Close()
	netnsMust(t, netns.InNamespacePath(hostNS, func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(inetFile.Fd()))}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("uplink")
		a, _ := netlink.ParseAddr("203.0.113.1/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		_, meta, _ := net.ParseCIDR("169.254.169.254/32")
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: meta, Gw: net.ParseIP("203.0.113.2")})
	}))
	var web, metadata net.Listener
	netnsMust(t, netns.InNamespacePath(inetNS, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("203.0.113.2/24")
		m, _ := netlink.ParseAddr("169.254.169.254/32")
		lo, _ := netlink.LinkByName("lo")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		if err := netlink.AddrAdd(lo, m); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if web, err = net.Listen("tcp4", "203.0.113.2:80"); err != nil {
			return err
		}
		metadata, err = net.Listen("tcp4", "169.254.169.254:80")
		return err
	}))
	for _, ln := range []net.Listener{web, metadata} {
		body := "internet"
		if ln == metadata {
			body = "METADATA"
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body+"\n") }),
			ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}

	resolv := filepath.Join(dir, "host-resolv.conf")
	netnsMust(t, os.WriteFile(resolv, []byte("nameserver 127.0.0.53\nnameserver 203.0.113.53\n"), 0o644))
	nw, err := netns.Open(netns.Config{StateDir: filepath.Join(dir, "state"), RunDir: filepath.Join(dir, "run"), HostNetNS: hostNS, HostResolvConf: resolv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	ctx := context.Background()
	opts, err := netns.ParseFlags(netns.Flags{Network: "bridge", Hostname: "netbox"})
	netnsMust(t, err)
	att, err := nw.Attach(ctx, "netns-ctr", opts)
	netnsMust(t, err)
	t.Cleanup(func() {
		if err := nw.Detach(ctx, "netns-ctr"); err != nil {
			t.Errorf("detach: %v", err)
		}
		if left, err := nw.GC(ctx, nil); err != nil || len(left) > 0 {
			t.Errorf("gc after detach found %v (%v)", left, err)
		}
	})
	etc := filepath.Join(dir, "etc")
	netnsMust(t, os.MkdirAll(etc, 0o755))
	netnsMust(t, os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte(att.ResolvConf), 0o644))
	netnsMust(t, os.WriteFile(filepath.Join(etc, "hosts"), []byte(att.Hosts), 0o644))

	root := fixture.NewBusyboxRootfs(t, filepath.Join(dir, "root"))
	for _, f := range []string{"resolv.conf", "hosts"} {
		netnsMust(t, os.WriteFile(filepath.Join(root, "etc", f), nil, 0o644))
	}
	// (busybox nc: Debian's static busybox wget crashes.)
	script := `ip -4 addr show eth0; cat /etc/resolv.conf /etc/hosts; ` +
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 203.0.113.2 80; ` +
		`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 1 169.254.169.254 80 || echo metadata-blocked`
	var out bytes.Buffer
	ctr, err := isolate.Start(filepath.Join(dir, "containers"), &isolate.Spec{
		ID: "netns-ctr", Rootfs: root, ReadonlyRootfs: true, Args: []string{"/bin/sh", "-c", script},
		Env: []string{"PATH=" + isolate.DefaultPath}, Hostname: "netbox", Seccomp: "default",
		Network: att.NetNSPath,
		Mounts: []specs.Mount{
			{Destination: "/etc/resolv.conf", Type: "bind", Source: filepath.Join(etc, "resolv.conf"), Options: []string{"bind", "ro"}},
			{Destination: "/etc/hosts", Type: "bind", Source: filepath.Join(etc, "hosts"), Options: []string{"bind", "ro"}},
		},
	}, isolate.IO{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("start sandbox in the bridged namespace: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ctr.Wait(); done <- err }()
	select {
	case err := <-done:
		netnsMust(t, err)
	case <-time.After(30 * time.Second):
		ctr.Kill()
		<-done
		t.Error("sandbox did not finish within 30s")
	}
	netnsMust(t, ctr.Destroy())
	got := out.String()
	for _, want := range []string{"inet " + att.IP.String() + "/16", "nameserver 203.0.113.53", att.IP.String() + "\tnetbox", "internet", "metadata-blocked"} {
		if !strings.Contains(got, want) {
			t.Errorf("sandbox output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "METADATA") || strings.Contains(got, "127.0.0.53") {
		t.Errorf("sandbox reached the metadata address or got a loopback name server:\n%s", got)
	}
}

func netnsLoUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(lo)
}

func netnsMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
