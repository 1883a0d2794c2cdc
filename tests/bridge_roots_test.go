package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/tests/fixture"
)

// Two sbx roots on one host share its bridge: 20 bridged creates in each,
// run side by side, get 40 different addresses, and every sandbox is
// reachable from the host but from no other sandbox, in its root or the
// other. Removing one root's sandboxes and its gc leave the other root's
// sandboxes working; at the end nothing is left (veths, rules, leases,
// namespaces, directories).
func TestBridgeTwoRootsSideBySide(t *testing.T) {
	a := newLCHost(t)
	b := newLCHost(t)
	b.netns = a.netns        // one host, two roots
	fixture.BusyboxRootfs(t) // built once, before the workers use it
	const perRoot, workers = 20, 4

	jobs := make(chan *lcHost)
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
	hostNS := "/run/netns/" + a.netns
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
	a.must(t, append([]string{"rm", "-f"}, ids(ofA)...)...)
	a.must(t, "gc")
	for _, m := range ofB {
		if err := hostGet(hostNS, m.ip); err != nil {
			t.Errorf("after root a's rm and gc, the host cannot reach root b's sandbox %s at %s: %v", m.id, m.ip, err)
		}
		if out := b.must(t, "exec", m.id, "--", "ip", "-4", "-o", "addr", "show", "eth0"); !strings.Contains(out, " "+m.ip+"/") {
			t.Errorf("root b's sandbox %s after root a's gc: eth0 %q, want %s", m.id, out, m.ip)
		}
	}
	if out, ok := sandboxGet(t, ofB[1], ofB[0].ip); ok {
		t.Errorf("after root a's gc, sandbox %s reached sandbox %s: %q", ofB[1].id, ofB[0].id, out)
	}
	// Each of root b's sandboxes has a lease, a veth and three chains
	// (fw-, in-, sp-); root a has nothing left.
	kinds := map[string]int{}
	for _, l := range bridgeLeftovers(t, a.root, a.run, a.netns) {
		kind, _, _ := strings.Cut(l, " ")
		kinds[kind]++
	}
	if n := len(ofB); kinds["veth:"] != n || kinds["lease"] != n || kinds["nft"] != 3*n {
		t.Errorf("with root b's %d sandboxes left: %v", n, kinds)
	}

	b.must(t, append([]string{"rm", "-f"}, ids(ofB)...)...)
	b.must(t, "gc")
	a.must(t, "gc")
	for _, h := range []*lcHost{a, b} {
		if left := bridgeLeftovers(t, h.root, h.run, a.netns); len(left) > 0 {
			t.Errorf("left after both roots removed their sandboxes:\n%s", strings.Join(left, "\n"))
		}
		h.must(t, "network", "reset")
	}
}

// createListening creates a bridged busybox sandbox in h's root that
// serves HTTP on port 8080, and returns its id and address.
func createListening(t *testing.T, h *lcHost) (id, ip string, err error) {
	r := h.sbx(t, "", "create", "--network", "bridge", "--rootfs", fixture.BusyboxRootfs(t))
	if r.code != 0 {
		return "", "", fmt.Errorf("create: exit %d: %s", r.code, r.stderr)
	}
	id = strings.TrimSpace(r.stdout)
	h.saw(id)
	r = h.sbx(t, "", "exec", id, "--", "sh", "-c",
		`mkdir -p /tmp/www && echo ok > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && ip -4 -o addr show eth0`)
	if r.code != 0 {
		return id, "", fmt.Errorf("start httpd in %s: exit %d: %s", id, r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	for i, w := range f {
		if w == "inet" && i+1 < len(f) {
			ip, _, _ = strings.Cut(f[i+1], "/")
		}
	}
	if ip == "" {
		return id, "", fmt.Errorf("no address on eth0 of %s: %q", id, r.stdout)
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
	h      *lcHost
	id, ip string
}

// sandboxGet asks for http://ip:8080/ from inside m (busybox nc: Debian's
// static busybox wget crashes) and reports whether an answer came.
func sandboxGet(t *testing.T, m bridged, ip string) (string, bool) {
	r := m.h.sbx(t, "", "exec", m.id, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 `+ip+` 8080`)
	return r.stdout, strings.Contains(r.stdout, "200 OK")
}

func ids(ms []bridged) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.id)
	}
	return out
}

// sharedLeases lists the lease files every root shares for the bridge in
// the stand-in host namespace ns, and the shared directory itself, which
// goes with the last lease.
func sharedLeases(t testing.TB, ns string) []string {
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
