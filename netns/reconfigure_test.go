package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/sbxrun/sbx"
	"golang.org/x/sys/unix"
)

// TestReconfigureReplacesTheRules: a sandbox attached with the default
// policy (a warm pool's member) gets an allow-list, a name server and an
// allowed host port at claim; what the old policy allowed is blocked
// after, what the new one allows answers, and detach leaves nothing.
func TestReconfigureReplacesTheRules(t *testing.T) {
	e := newTestEnv(t)
	e.attach("sb-other", AttachOptions{})
	before := e.leftovers()
	a := e.attach("sb-member", AttachOptions{Hostname: "member"})
	e.expectGet(a.NetNSPath, webIP+":80", "internet")
	e.expectBlocked(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort))

	got, err := e.net.Reconfigure(context.Background(), "sb-member", AttachOptions{Mode: ModeBridge,
		Egress: mustEgress(t, "192.168.77.0/24"), DNS: []netip.Addr{netip.MustParseAddr(privateDNSIP)},
		AllowHostPorts: []HostPort{{Port: hostSvcPort, Proto: TCP}}, Hostname: "claimed"})
	must(t, err)
	must(t, got.Wait())
	if got.ResolvConf != "nameserver "+privateDNSIP+"\n" || !strings.Contains(got.Hosts, "claimed") {
		t.Fatalf("resolv.conf %q, hosts %q", got.ResolvConf, got.Hosts)
	}
	if got.Egress.Kind != EgressAllowList || len(got.AllowHostPorts) != 1 {
		t.Fatalf("attachment after reconfigure: %+v", got)
	}
	e.expectBlocked(a.NetNSPath, webIP+":80")
	e.expectGet(a.NetNSPath, privateIP+":80", "private")
	e.expectGet(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort), "host")
	if ans, err := udpAskUntilAnswered(a.NetNSPath, privateDNSIP+":53", "q"); err != nil || ans != "echo:q" {
		t.Fatalf("the new name server: %q, %v", ans, err)
	}
	// The lease holds the new settings (Lookup reads it).
	l, err := e.net.Lookup("sb-member")
	must(t, err)
	if l.Egress.Kind != EgressAllowList || len(l.DNS) != 1 || !strings.Contains(l.Hosts, "claimed") {
		t.Fatalf("lease after reconfigure: %+v", l)
	}
	if _, err := e.net.Reconfigure(context.Background(), "sb-nobody", AttachOptions{Mode: ModeBridge}); err == nil {
		t.Fatal("reconfigured a sandbox without a network")
	}
	must(t, e.net.Detach(context.Background(), "sb-member"))
	if after := e.leftovers(); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("left behind:\n%v\nbefore:\n%v", after, before)
	}
}

// TestStandbyHolderTakesClaimedPorts: a pool member attached with a
// standby holder gets its published ports at the claim without a new
// holder: the standby one (same process) takes the sockets, so a host
// process cannot bind the port, and a connection to it reaches the
// sandbox; detach stops it, removes its socket and frees the port, and
// gc does for a member whose lease is lost.
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
	must(t, got.Wait())
	if len(got.Ports) != 1 || got.Ports[0].HostPort != 19080 {
		t.Fatalf("ports after the claim: %+v", got.Ports)
	}
	l, err = e.net.findLease("sb-member", false)
	must(t, err)
	if l.Holder == nil || *l.Holder != standby {
		t.Fatalf("holder after the claim: %+v, want the standby one %+v", l.Holder, standby)
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
	if holderRuns(standby) {
		t.Fatalf("the standby holder %d runs after detach", standby.PID)
	}
	// The standby holder's socket, unused since the claim, goes with the
	// lease.
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the standby socket after detach: %v", err)
	}
	if err := bindErr(); err != nil {
		t.Fatalf("the port after detach: %v", err)
	}
	// A member whose lease file is removed by hand: gc ends its standby
	// holder and removes its socket.
	_, err = e.net.Attach(ctx, "sb-lost", AttachOptions{Mode: ModeBridge, Standby: true})
	must(t, err)
	lost, err := e.net.findLease("sb-lost", false)
	must(t, err)
	must(t, os.Remove(e.net.leasePath(lost.IP)))
	_, err = e.net.GC(ctx, map[string]bool{"sb-other": true})
	must(t, err)
	if _, err := os.Stat(e.net.standbyPath(lost)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gc left the standby socket of a lost lease: %v", err)
	}
	if holderRuns(*lost.Holder) {
		t.Fatalf("gc left the standby holder %d of a lost lease", lost.Holder.PID)
	}
	if after := e.leftovers(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("left behind:\nbefore %v\nafter  %v", before, after)
	}
}

// holderRuns reports whether the holder h still runs: its process exists
// with its start time and is neither a zombie (Z) nor being reaped (X):
// this test's process reaps the holders it started a moment after they
// end, and /proc shows X while it does.
func holderRuns(h holder) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(h.PID) + "/stat")
	if err != nil {
		return false
	}
	start, err := procStart(h.PID)
	i := strings.LastIndexByte(string(data), ')')
	return err == nil && start == h.Start && i > 0 && i+2 < len(data) && data[i+2] != 'Z' && data[i+2] != 'X'
}

// TestReconfigureFailureRestoresTheNetwork: Reconfigure returns before
// anything changes; when the change, applied with Apply as a
// claim applies it, then fails (here the batch of rules,
// because the member's forward chain is gone), Wait says so and the
// network is as it was: the lease without the new policy or ports, the
// port free again (the holder that took it stopped); detach then leaves
// nothing.
func TestReconfigureFailureRestoresTheNetwork(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	standby := *l.Holder
	// The forward chain goes (its map element first, which jumps to it):
	// the batch that inserts the new rules into it fails.
	c, err := e.net.nft()
	must(t, err)
	inet, _, _ := e.net.tables()
	k := l.IP.As4()
	must(t, c.SetDeleteElements(fwdMap(inet), []nftables.SetElement{{Key: k[:]}}))
	fw := &nftables.Chain{Name: prefixForward + l.Key, Table: inet}
	c.FlushChain(fw)
	c.DelChain(fw)
	must(t, c.Flush())

	m, _ := ParsePublish("127.0.0.1:19081:8080")
	r, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m},
		Egress: mustEgress(t, "192.168.77.0/24")})
	must(t, err)
	if r.Egress.Kind != EgressAllowList || len(r.Ports) != 1 || r.Ports[0].HostPort != 19081 {
		t.Fatalf("the attachment Reconfigure returned: %+v", r.Attachment)
	}
	r.Apply() // as a claim does
	if err := r.Wait(); err == nil {
		t.Fatal("Wait succeeded though the rules could not be inserted")
	}
	got, err := e.net.findLease("sb-member", false)
	must(t, err)
	if got.Egress.Kind != EgressDefault || len(got.Ports) != 0 || got.Holder != nil {
		t.Fatalf("lease after the failed change: egress %v, ports %v, holder %+v; want the old one without the stopped holder", got.Egress.Kind, got.Ports, got.Holder)
	}
	if holderRuns(standby) {
		t.Fatalf("the holder %d that took the port runs after the failed change", standby.PID)
	}
	e.expectPortFree("127.0.0.1:19081")
	e.detachLeavingNothing("sb-member", before)
}

// TestReconfigureAbort: a Reconfigure given up before Apply changes
// nothing: the port it chose is free again, the lease is as it was, and
// the network's lock is released (the next Reconfigure of the sandbox
// goes through).
func TestReconfigureAbort(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	m, _ := ParsePublish("127.0.0.1:19082:8080")
	r, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m},
		Egress: mustEgress(t, "192.168.77.0/24")})
	must(t, err)
	r.Abort()
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	if l.Egress.Kind != EgressDefault || len(l.Ports) != 0 || l.Holder == nil {
		t.Fatalf("lease after an aborted change: egress %v, ports %v, holder %+v; want the old one with its standby holder", l.Egress.Kind, l.Ports, l.Holder)
	}
	e.expectPortFree("127.0.0.1:19082")
	r, err = e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	must(t, r.Wait())
	if l, err = e.net.findLease("sb-member", false); err != nil || len(l.Ports) != 1 {
		t.Fatalf("lease after the next change: %+v, %v", l, err)
	}
	e.detachLeavingNothing("sb-member", before)
}

// newStandbyMember attaches sb-member with a standby port holder (a warm
// pool's member) beside another sandbox, and returns the environment and
// its leftovers before the member.
func newStandbyMember(t *testing.T) (*testEnv, []string) {
	e := newTestEnv(t)
	e.attach("sb-other", AttachOptions{})
	before := e.leftovers()
	_, err := e.net.Attach(context.Background(), "sb-member", AttachOptions{Mode: ModeBridge, Standby: true})
	must(t, err)
	if l, err := e.net.findLease("sb-member", false); err != nil || l.Holder == nil {
		t.Fatalf("a standby attach recorded no holder: %+v, %v", l, err)
	}
	return e, before
}

// expectPortFree fails unless a host process can bind addr (TCP).
func (e *testEnv) expectPortFree(addr string) {
	e.t.Helper()
	if err := e.listenInHost(addr); err != nil {
		e.t.Fatalf("host port %s: %v, want it free", addr, err)
	}
}

// detachLeavingNothing detaches id and fails unless what is left is
// before.
func (e *testEnv) detachLeavingNothing(id string, before []string) {
	e.t.Helper()
	must(e.t, e.net.Detach(context.Background(), id))
	if after := e.leftovers(); strings.Join(after, ",") != strings.Join(before, ",") {
		e.t.Fatalf("left behind:\nbefore %v\nafter  %v", before, after)
	}
}

// TestReconfigureOnlyWhatChanges: a claim that changes the egress policy
// alone adds rules to the sandbox's forward chain only: its host-input
// chain keeps its rules (the allowed host port still answers), and the
// new policy holds (the internet blocked, the allowed range reached).
func TestReconfigureOnlyWhatChanges(t *testing.T) {
	e := newTestEnv(t)
	e.attach("sb-other", AttachOptions{})
	before := e.leftovers()
	hostPorts := []HostPort{{Port: hostSvcPort, Proto: TCP}}
	a, err := e.net.Attach(context.Background(), "sb-member", AttachOptions{Mode: ModeBridge, Standby: true, AllowHostPorts: hostPorts})
	must(t, err)
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	inet, _, _ := e.net.tables()
	count := func(prefix string) int {
		c, err := e.net.nft()
		must(t, err)
		rs, err := c.GetRules(inet, &nftables.Chain{Name: prefix + l.Key, Table: inet})
		must(t, err)
		return len(rs)
	}
	fw, in := count(prefixForward), count(prefixHostIn)
	r, err := e.net.Reconfigure(context.Background(), "sb-member", AttachOptions{Mode: ModeBridge,
		Egress: mustEgress(t, "192.168.77.0/24"), AllowHostPorts: hostPorts})
	must(t, err)
	must(t, r.Wait())
	if got := count(prefixHostIn); got != in {
		t.Fatalf("host-input chain: %d rules after a change of the egress policy alone, want its %d", got, in)
	}
	if got := count(prefixForward); got <= fw {
		t.Fatalf("forward chain: %d rules after a change of the egress policy, want more than %d", got, fw)
	}
	e.expectBlocked(a.NetNSPath, webIP+":80")
	e.expectGet(a.NetNSPath, privateIP+":80", "private")
	e.expectGet(a.NetNSPath, fmt.Sprintf("%s:%d", a.Gateway, hostSvcPort), "host")
	e.detachLeavingNothing("sb-member", before)
}

// TestUnreachableStandbyHolder: a claim whose member's standby holder
// cannot be reached (its socket gone) starts a holder for the ports,
// records it in the lease in the standby one's place and stops the
// standby one; the port is held, and detach frees it and leaves nothing.
func TestUnreachableStandbyHolder(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	standby := *l.Holder
	must(t, os.Remove(e.net.standbyPath(l)))
	m, _ := ParsePublish("127.0.0.1:19083:8080")
	r, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	must(t, r.Wait())
	l, err = e.net.findLease("sb-member", false)
	must(t, err)
	if l.Holder == nil || *l.Holder == standby || !holderRuns(*l.Holder) {
		t.Fatalf("holder after the claim: %+v, want a running one other than the standby %+v", l.Holder, standby)
	}
	if holderRuns(standby) {
		t.Fatalf("the unreachable standby holder %d runs after the claim", standby.PID)
	}
	if err := e.listenInHost("127.0.0.1:19083"); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("a host process binding the published port: %v, want EADDRINUSE", err)
	}
	e.detachLeavingNothing("sb-member", before)
	e.expectPortFree("127.0.0.1:19083")
}

// TestReconfigurePortOfAnotherSandbox: a claim that asks for a host port
// another sandbox publishes is refused as in use, naming that sandbox,
// and changes nothing.
func TestReconfigurePortOfAnotherSandbox(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	m, _ := ParsePublish("127.0.0.1:19084:8080")
	e.attach("sb-publisher", AttachOptions{Publish: []PortMapping{m}})
	_, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	if !errors.Is(err, sbx.ErrPortInUse) || !strings.Contains(err.Error(), "sb-publisher") {
		t.Fatalf("a claim of a port sb-publisher publishes: %v, want in use by sb-publisher", err)
	}
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	if len(l.Ports) != 0 {
		t.Fatalf("lease after a refused claim: ports %v", l.Ports)
	}
	must(t, e.net.Detach(ctx, "sb-publisher"))
	e.detachLeavingNothing("sb-member", before)
}

// TestClaimBindsOnSocketsMadeAhead: with a host namespace other than the
// process's, a standby attach leaves sockets made ahead in it; a claim
// publishing a port binds it on one of them (no namespace switch), and
// the port is held in the host namespace (a host process cannot bind it);
// the stock is filled again after the claim.
func TestClaimBindsOnSocketsMadeAhead(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	stocked := func() int {
		e.net.stock.mu.Lock()
		defer e.net.stock.mu.Unlock()
		return len(e.net.stock.tcp)
	}
	if got := stocked(); got != stockPerType {
		t.Fatalf("TCP sockets made ahead after a standby attach: %d, want %d", got, stockPerType)
	}
	m, _ := ParsePublish("127.0.0.1:19085:8080")
	r, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	if got := stocked(); got != stockPerType-1 {
		t.Fatalf("TCP sockets made ahead after a claim bound one: %d, want %d", got, stockPerType-1)
	}
	must(t, r.Wait())
	if err := e.listenInHost("127.0.0.1:19085"); !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("a host process binding the published port: %v, want EADDRINUSE", err)
	}
	for i := 0; stocked() != stockPerType; i++ {
		if i == 200 {
			t.Fatalf("the stock after the claim: %d sockets, want %d again", stocked(), stockPerType)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.detachLeavingNothing("sb-member", before)
	e.expectPortFree("127.0.0.1:19085")
}

// listenInHost listens on addr (TCP) in the host namespace, as a host
// process would, and closes the listener at once.
func (e *testEnv) listenInHost(addr string) error {
	return InNamespacePath(e.hostNS, func() error {
		ln, err := net.Listen("tcp4", addr)
		if err == nil {
			ln.Close()
		}
		return err
	})
}

// TestClaimFillsTheSpareLease: a pool member's lease has an empty spare
// file from its attach, which its claim's lease write fills and swaps in
// (the lease is then that very file), leaving the old lease in the spare
// (not a lease to readers: only the new one is found) and no staged file;
// a spare that is not empty is never used (the claim writes a new file);
// a lease's spare goes with it; a spare whose lease is gone is removed by
// the next reader of the leases.
func TestClaimFillsTheSpareLease(t *testing.T) {
	e, before := newStandbyMember(t)
	ctx := context.Background()
	l, err := e.net.findLease("sb-member", false)
	must(t, err)
	spare := e.net.sparePath(l)
	var st unix.Stat_t
	must(t, unix.Stat(spare, &st))
	if st.Size != 0 {
		t.Fatalf("the member's spare lease file holds %d bytes, want none", st.Size)
	}
	m, _ := ParsePublish("127.0.0.1:19083:8080")
	r, err := e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	must(t, r.Wait())
	var got unix.Stat_t
	must(t, unix.Stat(e.net.leasePath(l.IP), &got))
	if got.Ino != st.Ino {
		t.Errorf("the claimed lease is inode %d, want the spare's %d", got.Ino, st.Ino)
	}
	// The old lease stays at the spare's path, never used again.
	if data, err := os.ReadFile(spare); err != nil || !bytes.Contains(data, []byte(`"owner":"sb-member"`)) || bytes.Contains(data, []byte(`"ports"`)) {
		t.Errorf("the spare after the claim: %q, %v; want the old lease", data, err)
	}
	if _, err := os.Lstat(e.net.stagedPath(l)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staged lease file after the claim: %v, want none", err)
	}
	if l, err = e.net.findLease("sb-member", false); err != nil || len(l.Ports) != 1 || l.Ports[0].HostPort != 19083 {
		t.Fatalf("lease after the claim: %+v, %v", l, err)
	}
	e.detachLeavingNothing("sb-member", before)

	// A spare a crash left written.
	_, err = e.net.Attach(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Standby: true})
	must(t, err)
	l, err = e.net.findLease("sb-member", false)
	must(t, err)
	must(t, os.WriteFile(e.net.sparePath(l), []byte(`{"state":"attached"}`), 0o600))
	must(t, unix.Stat(e.net.sparePath(l), &st))
	r, err = e.net.Reconfigure(ctx, "sb-member", AttachOptions{Mode: ModeBridge, Publish: []PortMapping{m}})
	must(t, err)
	r.Apply() // as a claim does
	must(t, r.Wait())
	must(t, unix.Stat(e.net.leasePath(l.IP), &got))
	if got.Ino == st.Ino {
		t.Error("a claim used a spare lease file that was not empty")
	}
	if l, err = e.net.findLease("sb-member", false); err != nil || len(l.Ports) != 1 {
		t.Fatalf("lease after the claim beside a written spare: %+v, %v", l, err)
	}
	e.detachLeavingNothing("sb-member", before)

	// A spare without its lease.
	orphan := filepath.Join(e.net.leaseDir(), "10.88.200.200.json.spare")
	must(t, os.WriteFile(orphan, nil, 0o600))
	if _, err := e.net.findLease("sb-member", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a spare without its lease after reading the leases: %v", err)
	}
}
