package security

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// inNetNS runs fn on a thread inside the network namespace ns (a name
// under /run/netns); the thread is left to die afterwards.
func inNetNS(t testing.TB, ns string, fn func() error) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ch <- fn()
	}()
	return <-ch
}

// bindIn binds proto ("tcp" or "udp") at addr inside ns, as a host service
// started later would (with SO_REUSEADDR, as Go's listeners do), and
// closes it again. nil means the port was free to take.
func bindIn(t testing.TB, ns, proto, addr string) error {
	t.Helper()
	return inNetNS(t, ns, func() error {
		if proto == "udp" {
			c, err := net.ListenPacket("udp4", addr)
			if err == nil {
				c.Close()
			}
			return err
		}
		l, err := net.Listen("tcp4", addr)
		if err == nil {
			l.Close()
		}
		return err
	})
}

// freePortIn returns a TCP and UDP port free in ns.
func freePortIn(t testing.TB, ns string) int {
	t.Helper()
	var port int
	err := inNetNS(t, ns, func() error {
		for i := 0; i < 64; i++ {
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				return err
			}
			port = l.Addr().(*net.TCPAddr).Port
			l.Close()
			if c, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", port)); err == nil {
				c.Close()
				return nil
			}
		}
		return fmt.Errorf("no port free for both tcp and udp")
	})
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// holders counts the live port-holder processes of h's state root (a
// holder's second argument is its state directory, under h.Root): other
// roots on the machine have holders of their own.
func holders(t testing.TB, h *harness.Host) int {
	t.Helper()
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
		stat, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		ours := len(args) > 2 && strings.HasPrefix(args[2], h.Root+"/")
		// An ended holder waits as a zombie for its parent (or init) to
		// reap it; its sockets are closed.
		zombie := strings.Contains(string(stat), ") Z ")
		if err == nil && strings.HasPrefix(string(comm), "sbx-hold") && ours && !zombie {
			n++
		}
	}
	return n
}

// TestAdversarialPublishedPortsAreHeld: a published host port is held by
// a socket for the sandbox's life, as docker-proxy does: a host service
// started later cannot bind it (and so cannot have its clients' traffic
// captured by the sandbox's DNAT); a port in use on the host is refused
// with a clear message, exit code 125 from the CLI and 409 over REST; the
// port is free again after rm, and after a killed run and sbx gc.
func TestAdversarialPublishedPortsAreHeld(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	h := harness.NewHost(t)
	before := holders(t, h)
	tcp, udp := freePortIn(t, h.Netns), freePortIn(t, h.Netns)
	id := h.Create(t, "--network", "bridge", "-p", fmt.Sprintf("127.0.0.1:%d:80", tcp), "-p", fmt.Sprintf("%d:53/udp", udp))
	if n := holders(t, h); n <= before {
		t.Errorf("no port holder of this root runs for sandbox %s (%d before, %d now)", id, before, n)
	}
	for _, c := range []struct{ proto, addr string }{
		{"tcp", fmt.Sprintf("127.0.0.1:%d", tcp)}, {"tcp", fmt.Sprintf("0.0.0.0:%d", tcp)},
		{"udp", fmt.Sprintf("127.0.0.1:%d", udp)}, {"udp", fmt.Sprintf("0.0.0.0:%d", udp)},
	} {
		if err := bindIn(t, h.Netns, c.proto, c.addr); err == nil {
			t.Errorf("a host service could bind %s %s, published by sandbox %s", c.proto, c.addr, id)
		}
	}
	// The sandbox is still reached through the published port.
	h.Must(t, "exec", "-d", id, "--", "sh", "-c", "mkdir -p /www && echo held-port-ok >/www/index.html && httpd -p 80 -h /www")
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := harness.HTTPClientInNS(t, "/run/netns/"+h.Netns).Get(fmt.Sprintf("http://127.0.0.1:%d/", tcp))
		if err == nil {
			var b [64]byte
			n, _ := resp.Body.Read(b[:])
			resp.Body.Close()
			if got = string(b[:n]); strings.Contains(got, "held-port-ok") {
				break
			}
		}
	}
	if !strings.Contains(got, "held-port-ok") {
		t.Errorf("the published port does not reach the sandbox: %q", got)
	}

	// A port a host process holds is refused clearly, and nothing is left.
	busy := freePortIn(t, h.Netns)
	hold := make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- inNetNS(t, h.Netns, func() error {
			l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", busy))
			if err != nil {
				return err
			}
			held <- nil
			<-hold
			return l.Close()
		})
	}()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	r := h.Sbx(t, "", "create", "--network", "bridge", "--rootfs", root, "-p", fmt.Sprintf("%d:80", busy))
	if r.Code != 125 || !strings.Contains(r.Stderr, "in use") {
		t.Errorf("create publishing a port in use: exit %d (want 125) %s", r.Code, r.Stderr)
	}
	dir := t.TempDir()
	sock, token := filepath.Join(dir, "sbx.sock"), filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(harness.ServerTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := h.Command("serve", "--unix", sock, "--token-file", token, "--allow-host-dir", fixture.CacheDir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	body := fmt.Sprintf(`{"rootfs":%q,"network":"bridge","publish":["%d:80"]}`, root, busy)
	var status int
	var msg string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		req, _ := http.NewRequest("POST", "http://sbx/v1/sandboxes", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		var b [512]byte
		n, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		status, msg = resp.StatusCode, string(b[:n])
		break
	}
	if status != http.StatusConflict || !strings.Contains(msg, "in use") {
		t.Errorf("REST create publishing a port in use: %d %s, want 409 saying it is in use", status, msg)
	}
	close(hold)
	<-held

	// rm gives the ports back.
	h.Must(t, "rm", "-f", id)
	for _, c := range []struct{ proto, addr string }{{"tcp", fmt.Sprintf("127.0.0.1:%d", tcp)}, {"udp", fmt.Sprintf("0.0.0.0:%d", udp)}} {
		if err := bindIn(t, h.Netns, c.proto, c.addr); err != nil {
			t.Errorf("after rm, %s %s is still taken: %v", c.proto, c.addr, err)
		}
	}

	// A one-shot run killed with SIGKILL: gc gives its port back.
	run := h.Command("run", "--network", "bridge", "--rootfs", root, "-p", fmt.Sprintf("%d:80", tcp), "--", "sleep", "107")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, func() bool { return harness.CountHostProcesses(t, "sleep 107") == 1 })
	if err := bindIn(t, h.Netns, "tcp", fmt.Sprintf("0.0.0.0:%d", tcp)); err == nil {
		t.Errorf("a one-shot run's published port could be bound by a host service")
	}
	_ = run.Process.Kill()
	_ = run.Wait()
	if r := h.Sbx(t, "", "gc"); r.Code != 0 {
		t.Fatalf("gc: exit %d %s", r.Code, r.Stderr)
	}
	if err := bindIn(t, h.Netns, "tcp", fmt.Sprintf("0.0.0.0:%d", tcp)); err != nil {
		t.Errorf("after a killed run and gc, port %d is still taken: %v", tcp, err)
	}
	if n := holders(t, h); n != before {
		t.Errorf("%d port-holder processes left (%d before)", n, before)
	}
}
