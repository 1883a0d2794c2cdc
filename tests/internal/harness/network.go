package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbxrun/sbx/netns"
	"golang.org/x/sys/unix"
)

var nsCount atomic.Int64

// HostNS creates a network namespace that stands in for the host, so
// that bridge networking never touches the machine's real interfaces.
func HostNS(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sbxt-%d-%d", os.Getpid(), nsCount.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	return name
}

// HTTPClientInNS returns an HTTP client whose connections are made inside
// the network namespace at nsPath (a socket keeps the namespace it was
// created in).
func HTTPClientInNS(t testing.TB, nsPath string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // the thread is left to die: it changed namespace
			target, err := os.Open(nsPath)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", nsPath, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// SharedLeases lists the lease files every root shares for the bridge in
// the stand-in host namespace ns, and the shared directory itself, which
// goes with the last lease.
func SharedLeases(t testing.TB, ns string) []string {
	t.Helper()
	dir, err := netns.SharedStateDir("", "/run/netns/"+ns, "")
	if err != nil {
		t.Fatalf("shared network state of %s: %v", ns, err)
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	out := []string{"shared state directory " + dir}
	ents, _ := os.ReadDir(filepath.Join(dir, "leases"))
	for _, e := range ents {
		out = append(out, "lease "+e.Name())
	}
	return out
}
