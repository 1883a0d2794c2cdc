package netns

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestAttachDetachCyclesLeaveNothing(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	pub, _ := ParsePublish("0:80")
	udp, _ := ParsePublish("0:53/udp")
	const cycles = 100
	pooled := 0
	for i := 0; i < cycles; i++ {
		if i%2 == 0 {
			if _, err := e.net.Prepare(ctx, 1); err != nil {
				t.Fatalf("cycle %d: prefill: %v", i, err)
			}
		}
		id := fmt.Sprintf("cycle-%d", i)
		opts := AttachOptions{Mode: ModeBridge, Publish: []PortMapping{pub, udp},
			AllowHostPorts: []HostPort{{Port: 22, Proto: TCP}}}
		if i%3 == 0 {
			opts.Egress = EgressPolicy{Kind: EgressNone}
		}
		a, err := e.net.Attach(ctx, id, opts)
		if err != nil {
			t.Fatalf("cycle %d: attach: %v", i, err)
		}
		if a.FromPool {
			pooled++
		}
		if err := e.net.Detach(ctx, id); err != nil {
			t.Fatalf("cycle %d: detach: %v", i, err)
		}
	}
	if pooled != cycles/2 {
		t.Errorf("%d of %d attaches came from the pool, want %d", pooled, cycles, cycles/2)
	}
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("after %d attach/detach cycles these are left: %v", cycles, left)
	}
	// The last sandbox can still reach the internet: the base setup survived.
	a := e.attach("after-cycles", AttachOptions{})
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
}

func TestPoolIsUsedAndDrained(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	n, err := e.net.Prepare(ctx, 3)
	if err != nil || n != 3 {
		t.Fatalf("prefill 3: %d, %v", n, err)
	}
	if got, _ := e.net.Prepared(); got != 3 {
		t.Fatalf("pooled = %d, want 3", got)
	}
	// A second Network on the same state (another sbx process) uses the pool.
	other, err := Open(e.cfg)
	must(t, err)
	defer other.Close()
	a, err := other.Attach(ctx, "from-pool", AttachOptions{Mode: ModeBridge})
	must(t, err)
	t.Cleanup(func() { other.Detach(ctx, "from-pool") })
	if !a.FromPool {
		t.Fatal("attach did not take the prepared namespace")
	}
	if got, _ := e.net.Prepared(); got != 2 {
		t.Fatalf("pooled after one attach = %d, want 2", got)
	}
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
	e.expectBlocked(a.NetNSPath, metadataIP+":80")
	must(t, e.net.DiscardPrepared(ctx))
	if got, _ := e.net.Prepared(); got != 0 {
		t.Fatalf("pooled after drain = %d", got)
	}
	must(t, other.Detach(ctx, "from-pool"))
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("left after drain and detach: %v", left)
	}
}

func TestGCRemovesDeadSandboxesAndCrashDebris(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	pub, _ := ParsePublish("0:80")
	live := e.attach("alive", AttachOptions{Publish: []PortMapping{pub}})
	_, err := e.net.Attach(ctx, "dead", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{pub}})
	must(t, err)

	// Debris of a crash in the middle of Attach: a lease still "attaching".
	crashed, err := e.net.Attach(ctx, "crashed", AttachOptions{Mode: ModeBridge})
	must(t, err)
	leaseFile := filepath.Join(e.net.leaseDir(), crashed.IP.String()+".json")
	var l lease
	data, _ := os.ReadFile(leaseFile)
	must(t, json.Unmarshal(data, &l))
	l.State = stateAttaching
	data, _ = json.Marshal(l)
	must(t, os.WriteFile(leaseFile, data, 0o600))
	// A sandbox whose lease file vanished: veth, namespace and rules remain.
	orphan, err := e.net.Attach(ctx, "orphan", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{pub}})
	must(t, err)
	must(t, os.Remove(filepath.Join(e.net.leaseDir(), orphan.IP.String()+".json")))
	_, err = e.net.Prepare(ctx, 1)
	must(t, err)
	// A namespace mount nobody recorded, and a corrupt lease.
	must(t, CreateNamespace(filepath.Join(e.cfg.RunDir, "stray"), nil))
	must(t, os.WriteFile(filepath.Join(e.net.leaseDir(), "10.88.9.9.json"), []byte("{garbage"), 0o600))

	removed, err := e.net.GC(ctx, map[string]bool{"alive": true, "crashed": true})
	if err != nil {
		t.Fatalf("gc: %v (removed %v)", err, removed)
	}
	t.Logf("gc removed: %v", removed)
	joined := strings.Join(removed, "\n")
	// The lease left attaching was already swept by the attaches after it.
	if data, _ := exec.Command("grep", "-rl", `"crashed"`, e.net.leaseDir()).Output(); len(data) > 0 {
		t.Errorf("the lease left attaching is still there: %s", data)
	}
	for _, want := range []string{"dead", "stray", "10.88.9.9",
		"veth " + orphan.HostVeth, "chain fw-" + strings.TrimPrefix(orphan.HostVeth, "sbx"), "chain pt-", "chain sp-", "elements of map fwd", "elements of map ports", "published-port jump", "port holder"} {
		if !strings.Contains(joined, want) {
			t.Errorf("gc did not report removing %q", want)
		}
	}
	if got, _ := e.net.Prepared(); got != 1 {
		t.Errorf("gc touched the pool: pooled = %d, want 1", got)
	}
	if a, _ := e.net.Lookup("dead"); a != nil {
		t.Error("dead sandbox still has a lease")
	}
	// The live sandbox keeps working, published port included.
	e.expectGet(live.NetNSPath, webIP+":80", "internet")
	e.serveHTTP(live.NetNSPath, "0.0.0.0:80", "alive")
	e.expectGet(e.hostNS, fmt.Sprintf("127.0.0.1:%d", live.Ports[0].HostPort), "alive")

	// Once every sandbox is gone and the pool drained, nothing is left.
	must(t, e.net.Detach(ctx, "alive"))
	_, err = e.net.GC(ctx, nil)
	must(t, err)
	must(t, e.net.DiscardPrepared(ctx))
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("left after gc: %v", left)
	}
	must(t, e.net.Reset(ctx))
	if _, err := e.net.host.LinkByName("sbx0"); err == nil {
		t.Fatal("reset left the bridge")
	}
}

func TestNoneAndHostModes(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	a, err := e.net.Attach(ctx, "none", AttachOptions{Hostname: "quiet"})
	must(t, err)
	if a.Mode != ModeNone || a.NetNSPath != "" || a.IP.IsValid() || !strings.Contains(a.Hosts, "quiet") {
		t.Fatalf("none attachment: %+v", a)
	}
	h, err := e.net.Attach(ctx, "host", AttachOptions{Mode: ModeHost})
	must(t, err)
	if h.Mode != ModeHost || h.NetNSPath != "" {
		t.Fatalf("host attachment: %+v", h)
	}
	must(t, e.net.Detach(ctx, "none"))
	if _, err := e.net.Attach(ctx, "x", AttachOptions{Mode: ModeNone, Publish: []PortMapping{{HostPort: 1, ContainerPort: 1, Proto: TCP}}}); err == nil {
		t.Fatal("--publish accepted without bridge mode")
	}
	// none and host never create the bridge.
	if _, err := e.net.host.LinkByName("sbx0"); err == nil {
		t.Fatal("none/host mode created the bridge")
	}
}

func TestSubnetAvoidsExistingRoute(t *testing.T) {
	e := newTestEnv(t)
	// The host already routes 10.88.0.0/16 somewhere: sbx must pick another.
	must(t, InNamespacePath(e.hostNS, func() error {
		return runNetlinkRoute("10.88.0.0/16", webIP)
	}))
	a := e.attach("moved", AttachOptions{})
	if sub, _ := e.net.Subnet(); sub.String() != "10.89.0.0/16" || !sub.Contains(a.IP) {
		t.Fatalf("subnet = %s, ip = %s; want 10.89.0.0/16", sub, a.IP)
	}
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
	// An explicit subnet that collides is an error.
	cfg := e.cfg
	cfg.BridgeName, cfg.StateDir = "sbx1", filepath.Join(e.dir, "state2")
	cfg.Subnet = mustPrefix("10.88.4.0/24")
	n2, err := Open(cfg)
	must(t, err)
	defer n2.Close()
	if _, err := n2.Attach(context.Background(), "y", AttachOptions{Mode: ModeBridge}); err == nil || !strings.Contains(err.Error(), "collides") {
		t.Fatalf("colliding subnet: err = %v", err)
	}
}

// After a reboot the bridge, veths, rules and namespace mounts are gone,
// and so is the shared lease directory (it is on /run); the lease files an
// older sbx kept under the root's state directory remain. The next use
// adopts them, GC clears them and bridging works again.
func TestGCAfterHostStateLost(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	pub, _ := ParsePublish("0:80")
	a := e.attach("before-reboot", AttachOptions{Publish: []PortMapping{pub}})
	_, err := e.net.Prepare(ctx, 2)
	must(t, err)
	// What an older sbx left: its leases under the root, without a root.
	own := filepath.Join(e.cfg.StateDir, "leases")
	must(t, os.MkdirAll(own, 0o700))
	ents, _ := os.ReadDir(e.net.leaseDir())
	for _, x := range ents {
		data, err := os.ReadFile(filepath.Join(e.net.leaseDir(), x.Name()))
		must(t, err)
		var l lease
		must(t, json.Unmarshal(data, &l))
		l.Root = ""
		data, _ = json.Marshal(l)
		must(t, os.WriteFile(filepath.Join(own, x.Name()), data, 0o600))
	}
	// "Reboot": a fresh host namespace, the namespace mounts vanish.
	ents, _ = os.ReadDir(e.cfg.RunDir)
	for _, x := range ents {
		must(t, RemoveNamespace(filepath.Join(e.cfg.RunDir, x.Name())))
	}
	fresh := filepath.Join(e.dir, "host-after-reboot")
	must(t, CreateNamespace(fresh, loUp))
	t.Cleanup(func() { RemoveNamespace(fresh) })
	cfg := e.cfg
	cfg.HostNetNS = fresh
	nw, err := Open(cfg)
	must(t, err)
	defer nw.Close()

	removed, err := nw.GC(ctx, map[string]bool{})
	if err != nil {
		t.Fatalf("gc after reboot: %v", err)
	}
	if len(removed) != 3 {
		t.Errorf("gc removed %v, want the 3 leases", removed)
	}
	for _, d := range []string{nw.leaseDir(), own} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Fatalf("leases left in %s after gc: %d", d, len(ents))
		}
	}
	b, err := nw.Attach(ctx, "after-reboot", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{pub}})
	must(t, err)
	if b.IP != a.IP {
		t.Errorf("first address after gc = %s, want %s again", b.IP, a.IP)
	}
	must(t, nw.Detach(ctx, "after-reboot"))
	// The old namespace still has its leases (its own directory).
	must(t, e.net.Detach(ctx, "before-reboot"))
	must(t, e.net.DiscardPrepared(ctx))
}

// Several Networks on one state directory (several sbx processes) attach at
// once: every sandbox gets its own address and everything is released.
func TestConcurrentAttachFromSeveralProcesses(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	const workers, rounds = 4, 5
	errs := make(chan error, workers)
	seen := make(chan string, workers*rounds)
	for w := 0; w < workers; w++ {
		go func(w int) {
			nw, err := Open(e.cfg)
			if err != nil {
				errs <- err
				return
			}
			defer nw.Close()
			for r := 0; r < rounds; r++ {
				id := fmt.Sprintf("w%d-r%d", w, r)
				a, err := nw.Attach(ctx, id, AttachOptions{Mode: ModeBridge})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
					return
				}
				seen <- a.IP.String()
				if r%2 == 1 { // keep some attached while others come and go
					if err := nw.Detach(ctx, id); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(seen)
	leases, err := e.net.readLeases()
	must(t, err)
	ips := map[string]bool{}
	for _, l := range leases {
		if ips[l.IP.String()] {
			t.Fatalf("address %s leased twice", l.IP)
		}
		ips[l.IP.String()] = true
	}
	if len(leases) != workers*3 {
		t.Fatalf("%d leases held, want %d", len(leases), workers*3)
	}
	_, err = e.net.GC(ctx, nil)
	must(t, err)
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("left after gc: %v", left)
	}
}

func TestAddressExhaustionIsAClearError(t *testing.T) {
	e := newTestEnv(t)
	cfg := e.cfg
	cfg.BridgeName, cfg.Subnet = "sbxsmall", mustPrefix("10.77.0.0/28") // .2 to .14 free
	cfg.StateDir, cfg.RunDir = filepath.Join(e.dir, "small-state"), filepath.Join(e.dir, "small-run")
	nw, err := Open(cfg)
	must(t, err)
	t.Cleanup(func() { nw.Close() })
	ctx := context.Background()
	for i := 0; i < 13; i++ {
		id := fmt.Sprintf("fill-%d", i)
		if _, err := nw.Attach(ctx, id, AttachOptions{Mode: ModeBridge}); err != nil {
			t.Fatalf("attach %d of 13: %v", i+1, err)
		}
		t.Cleanup(func() { nw.Detach(ctx, id) })
	}
	_, err = nw.Attach(ctx, "one-too-many", AttachOptions{Mode: ModeBridge})
	if err == nil || !strings.Contains(err.Error(), "no free address left in 10.77.0.0/28") {
		t.Fatalf("14th attach in a /28: err = %v", err)
	}
	must(t, nw.Detach(ctx, "fill-3"))
	a, err := nw.Attach(ctx, "one-too-many", AttachOptions{Mode: ModeBridge})
	must(t, err)
	t.Cleanup(func() { nw.Detach(ctx, "one-too-many") })
	if a.IP.String() != "10.77.0.5" {
		t.Errorf("freed address not reused: got %s, want 10.77.0.5", a.IP)
	}
	// A second bridge in the same namespace has tables of its own and works
	// next to sbx0.
	first := e.attach("on-sbx0", AttachOptions{})
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
	e.expectGet(first.NetNSPath, webIP+":80", "internet")
	e.expectBlocked(a.NetNSPath, metadataIP+":80")
}

// setLeaseState rewrites the lease of ip as an operation killed midway
// would have left it.
func (e *testEnv) setLeaseState(ip string, st leaseState, owner string) {
	e.t.Helper()
	p := filepath.Join(e.net.leaseDir(), ip+".json")
	var l lease
	data, err := os.ReadFile(p)
	must(e.t, err)
	must(e.t, json.Unmarshal(data, &l))
	l.State, l.Owner = st, owner
	data, _ = json.Marshal(l)
	must(e.t, os.WriteFile(p, data, 0o600))
}

// A create killed while its namespace was being prepared leaves a lease in
// state "preparing" (with its veth, namespace and rules). Detach of that
// sandbox, a sweep (gc, server start), the next attach, a pool drain and a
// reset all remove such debris; none of them refuses because of it.
func TestInterruptedPrepareIsUndone(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	prepared := func() string {
		t.Helper()
		_, err := e.net.Prepare(ctx, 1)
		must(t, err)
		ents, _ := os.ReadDir(e.net.leaseDir())
		for _, x := range ents {
			ip := strings.TrimSuffix(x.Name(), ".json")
			data, _ := os.ReadFile(filepath.Join(e.net.leaseDir(), x.Name()))
			if strings.Contains(string(data), `"pooled"`) {
				return ip
			}
		}
		t.Fatal("no pooled lease")
		return ""
	}
	// Killed while preparing for sandbox "victim": its own Detach (what gc
	// of the interrupted create runs) finds it.
	e.setLeaseState(prepared(), statePreparing, "victim")
	must(t, e.net.Detach(ctx, "victim"))
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("detach of the interrupted sandbox left %v", left)
	}
	// Killed while preparing for the pool, or while attaching: swept.
	e.setLeaseState(prepared(), statePreparing, "")
	e.setLeaseState(prepared(), stateAttaching, "gone")
	removed, err := e.net.SweepInterrupted(ctx)
	if err != nil || len(removed) != 2 {
		t.Fatalf("sweep: %v %v", removed, err)
	}
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("the sweep left %v", left)
	}
	// The next attach sweeps too, and a reset is not refused by debris.
	e.setLeaseState(prepared(), statePreparing, "")
	_, err = e.net.Attach(ctx, "next", AttachOptions{Mode: ModeBridge})
	must(t, err)
	must(t, e.net.Detach(ctx, "next"))
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("after the next attach and its detach: %v", left)
	}
	e.setLeaseState(prepared(), statePreparing, "")
	must(t, e.net.Reset(ctx))
	for _, d := range []string{e.net.leaseDir(), e.cfg.RunDir} {
		if ents, _ := os.ReadDir(d); len(ents) > 0 {
			t.Errorf("after reset %s holds %d entries", d, len(ents))
		}
	}
}

// A link that vanished between listing and deleting it (a veth goes with
// its peer's namespace, which the kernel destroys asynchronously) counts
// as deleted: GC after lost namespaces failed on "no such device" under load.
func TestDeleteVanishedLinkIsSuccess(t *testing.T) {
	e := newTestEnv(t)
	must(t, e.net.host.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sbxgone0"}, PeerName: "sbxgone1"}))
	link, err := e.net.host.LinkByName("sbxgone0")
	must(t, err)
	must(t, e.net.host.LinkDel(link)) // someone else deletes it first
	gone, err := e.net.deleteLink(link)
	if err != nil || !gone {
		t.Fatalf("deleting a vanished link: gone=%v err=%v, want gone and no error", gone, err)
	}
}
