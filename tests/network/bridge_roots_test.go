package network

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// Two sbx roots on one host share its bridge: 20 bridged creates in each,
// run side by side, get 40 different addresses, and every sandbox is
// reachable from the host but from no other sandbox, in its root or the
// other. Removing one root's sandboxes and its gc leave the other root's
// sandboxes working; at the end nothing is left (veths, rules, leases,
// namespaces, directories).
func TestBridgeTwoRootsSideBySide(t *testing.T) {
	a := harness.NewHost(t)
	b := harness.NewHost(t)
	b.Netns = a.Netns        // one host, two roots
	fixture.BusyboxRootfs(t) // built once, before the workers use it
	const perRoot, workers = 20, 4

	jobs := make(chan *harness.Host)
	var mu sync.Mutex
	var all []bridged
	var failures []string
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range jobs {
				id, ip, err := createListening(t, h)
				mu.Lock()
				if err != nil {
					failures = append(failures, err.Error())
				} else {
					all = append(all, bridged{h, id, ip})
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < perRoot; i++ {
		jobs <- a
		jobs <- b
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d bridged creates failed:\n%s", len(failures), 2*perRoot, strings.Join(failures, "\n"))
	}
	byIP := map[string]string{}
	var ofA, ofB []bridged
	for _, m := range all {
		if other, dup := byIP[m.ip]; dup {
			t.Errorf("sandboxes %s and %s both have address %s", other, m.id, m.ip)
		}
		byIP[m.ip] = m.id
		if m.h == a {
			ofA = append(ofA, m)
		} else {
			ofB = append(ofB, m)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	hostNS := "/run/netns/" + a.Netns
	for _, m := range all {
		if err := hostGet(hostNS, m.ip); err != nil {
			t.Errorf("the host cannot reach sandbox %s at %s: %v", m.id, m.ip, err)
		}
	}
	// No sandbox reaches another: in its own root or across.
	for _, pair := range [][2]bridged{{ofA[0], ofA[1]}, {ofA[0], ofB[0]}, {ofB[1], ofB[0]}, {ofB[2], ofA[2]}} {
		if out, ok := sandboxGet(t, pair[0], pair[1].ip); ok {
			t.Errorf("sandbox %s reached sandbox %s at %s: %q", pair[0].id, pair[1].id, pair[1].ip, out)
		}
	}

	// Root a removes its sandboxes and collects garbage: root b's keep
	// their addresses, rules and traffic.
	a.Must(t, append([]string{"rm", "-f"}, ids(ofA)...)...)
	a.Must(t, "gc")
	for _, m := range ofB {
		if err := hostGet(hostNS, m.ip); err != nil {
			t.Errorf("after root a's rm and gc, the host cannot reach root b's sandbox %s at %s: %v", m.id, m.ip, err)
		}
		if out := b.Must(t, "exec", m.id, "--", "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(out, " "+m.ip+"/") {
			t.Errorf("root b's sandbox %s after root a's gc: eth0 %q, want %s", m.id, out, m.ip)
		}
	}
	if out, ok := sandboxGet(t, ofB[1], ofB[0].ip); ok {
		t.Errorf("after root a's gc, sandbox %s reached sandbox %s: %q", ofB[1].id, ofB[0].id, out)
	}
	// Each of root b's sandboxes has a lease, a veth and three chains
	// (fw-, in-, sp-); root a has nothing left.
	kinds := map[string]int{}
	for _, l := range harness.BridgeLeftovers(t, a.Root, a.Run, a.Netns) {
		kind, _, _ := strings.Cut(l, " ")
		kinds[kind]++
	}
	if n := len(ofB); kinds["veth:"] != n || kinds["lease"] != n || kinds["nft"] != 3*n {
		t.Errorf("with root b's %d sandboxes left: %v", n, kinds)
	}

	b.Must(t, append([]string{"rm", "-f"}, ids(ofB)...)...)
	b.Must(t, "gc")
	a.Must(t, "gc")
	for _, h := range []*harness.Host{a, b} {
		if left := harness.BridgeLeftovers(t, h.Root, h.Run, a.Netns); len(left) > 0 {
			t.Errorf("left after both roots removed their sandboxes:\n%s", strings.Join(left, "\n"))
		}
		h.Must(t, "network", "reset")
	}
}

// createListening creates a bridged busybox sandbox in h's root that
// serves HTTP on port 8080, and returns its id and address.
func createListening(t *testing.T, h *harness.Host) (id, ip string, err error) {
	r := h.Sbx(t, "", "create", "--network", "bridge", "--rootfs", fixture.BusyboxRootfs(t))
	if r.Code != 0 {
		return "", "", fmt.Errorf("create: exit %d: %s", r.Code, r.Stderr)
	}
	id = strings.TrimSpace(r.Stdout)
	h.Saw(id)
	r = h.Sbx(t, "", "exec", id, "--", "sh", "-c",
		`mkdir -p /tmp/www && echo ok > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && ip -4 -o addr show eth0`)
	if r.Code != 0 {
		return id, "", fmt.Errorf("start httpd in %s: exit %d: %s", id, r.Code, r.Stderr)
	}
	f := strings.Fields(r.Stdout)
	for i, w := range f {
		if w == "inet" && i+1 < len(f) {
			ip, _, _ = strings.Cut(f[i+1], "/")
		}
	}
	if ip == "" {
		return id, "", fmt.Errorf("no address on eth0 of %s: %q", id, r.Stdout)
	}
	return id, ip, nil
}

// hostGet fetches http://ip:8080/ from the stand-in host namespace.
func hostGet(ns, ip string) error {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.Dial(ctx, ns, network, addr)
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + ip + ":8080/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err == nil && strings.TrimSpace(string(body)) != "ok" {
		err = fmt.Errorf("got %q", body)
	}
	return err
}

// bridged is a bridged sandbox of a root and its address.
type bridged struct {
	h      *harness.Host
	id, ip string
}

// sandboxGet asks for http://ip:8080/ from inside m (busybox nc: Debian's
// static busybox wget crashes) and reports whether an answer came.
func sandboxGet(t *testing.T, m bridged, ip string) (string, bool) {
	r := m.h.Sbx(t, "", "exec", m.id, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 `+ip+` 8080`)
	return r.Stdout, strings.Contains(r.Stdout, "200 OK")
}

func ids(ms []bridged) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}
