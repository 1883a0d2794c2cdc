package netns

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/egress"
)

// prefixEgress names the per-sandbox NAT chain that redirects a sandbox
// with a policy by name to the egress daemon.
const prefixEgress = "eg-"

// fromPolicy turns a parsed egress policy into an EgressPolicy: a plain
// CIDR allow-list (or "*") keeps today's form, anything with names, deny
// entries, L7 rules or secrets keeps the whole policy in Names.
func fromPolicy(p egress.Policy) EgressPolicy {
	kind := EgressAllowList
	if p.All {
		kind = EgressDefault
	}
	ep := EgressPolicy{Kind: kind, Allow: p.AllowedCIDRs()}
	if p.HasNames() || len(p.Deny) > 0 {
		ep.Names = &p
	}
	return ep
}

// PolicyEgress makes the EgressPolicy of a by-name policy (from a policy
// file or the API), after checking it.
func PolicyEgress(p egress.Policy) (EgressPolicy, error) {
	if err := p.Validate(); err != nil {
		return EgressPolicy{}, err
	}
	return fromPolicy(p), nil
}

// proxied reports whether the policy sends the sandbox's web traffic and
// DNS through the egress daemon.
func (p EgressPolicy) proxied() bool { return p.Names.HasNames() }

// equal reports whether two policies are the same.
func (p EgressPolicy) equal(q EgressPolicy) bool {
	return p.kind() == q.kind() && slices.Equal(p.Allow, q.Allow) && reflect.DeepEqual(p.Names, q.Names)
}

// redirectPorts are the TCP ports of a proxied sandbox that go to the
// egress daemon: 80, 443 and every port a name entry names.
func (p EgressPolicy) redirectPorts() []uint16 {
	ports := slices.Clone(egress.DefaultPorts)
	for _, r := range p.Names.Allow {
		if r.IsName() && r.Port != 0 && !slices.Contains(ports, r.Port) {
			ports = append(ports, r.Port)
		}
	}
	return ports
}

// egressNATRules are the rules of chain eg-KEY: TCP to the redirected
// ports goes to the daemon's proxy, DNS (UDP and TCP) to its resolver.
// REDIRECT sends to the bridge's address, where the daemon listens; when
// it does not, the kernel resets the connection (fail closed).
func egressNATRules(ch *nftables.Chain, l *lease) []*nftables.Rule {
	var rules []*nftables.Rule
	redirect := func(proto byte, from, to uint16) {
		rules = append(rules, &nftables.Rule{Table: ch.Table, Chain: ch, Exprs: join(l4proto(proto), dport(from), []expr.Any{
			&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, to)},
			&expr.Redir{RegisterProtoMin: 1},
		})})
	}
	for _, p := range l.Egress.redirectPorts() {
		redirect(unix.IPPROTO_TCP, p, egress.ProxyPort)
	}
	redirect(unix.IPPROTO_UDP, 53, egress.DNSPort)
	redirect(unix.IPPROTO_TCP, 53, egress.DNSPort)
	return rules
}

// addEgressRedirect adds chain eg-KEY and its jump from prerouting (first,
// with the lease's key as user data) for a proxied sandbox.
func (n *Network) addEgressRedirect(c ruleWriter, l *lease) {
	_, nat, _ := n.tables()
	ch := c.AddChain(&nftables.Chain{Name: prefixEgress + l.Key, Table: nat})
	for _, r := range egressNATRules(ch, l) {
		c.AddRule(r)
	}
	c.InsertRule(&nftables.Rule{Table: nat, Chain: &nftables.Chain{Name: "prerouting", Table: nat},
		Exprs: join(ifname(true, n.cfg.BridgeName, true), ipSaddrIn(netip.PrefixFrom(l.IP, 32)), jump(ch.Name)), UserData: []byte(l.Key)})
}

// replaceEgressRedirect changes (in c's batch) the redirect of a sandbox
// whose policy goes from old to l's: the chain is made, refilled or
// removed with its jump.
func (n *Network) replaceEgressRedirect(c ruleWriter, old, l *lease) error {
	_, nat, _ := n.tables()
	ch := &nftables.Chain{Name: prefixEgress + l.Key, Table: nat}
	switch was, is := old.Egress.proxied(), l.Egress.proxied(); {
	case !was && is:
		n.addEgressRedirect(c, l)
	case was && is:
		c.FlushChain(ch)
		for _, r := range egressNATRules(ch, l) {
			c.AddRule(r)
		}
	case was && !is:
		// The jump's handle is looked up on a connection of its own.
		lc, err := n.nft()
		if err != nil {
			return err
		}
		if err := delKeyedRules(lc, c, nat, "prerouting", l.Key); err != nil {
			return err
		}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	return nil
}

// egressFilterRules are the rules a proxied sandbox's chains get first:
// the daemon's ports are reachable on the host only through the redirect
// (ct status dnat), and UDP 443 is refused at once so that QUIC clients
// fall back to TCP.
func egressFilterRules(fw, in *nftables.Chain) []*nftables.Rule {
	var rules []*nftables.Rule
	add := func(ch *nftables.Chain, exprs ...expr.Any) {
		rules = append(rules, &nftables.Rule{Table: ch.Table, Chain: ch, Exprs: exprs})
	}
	add(in, join(l4proto(unix.IPPROTO_TCP), dport(egress.ProxyPort), ctStatusDNAT(), verdict(expr.VerdictAccept))...)
	add(in, join(l4proto(unix.IPPROTO_TCP), dport(egress.DNSPort), ctStatusDNAT(), verdict(expr.VerdictAccept))...)
	add(in, join(l4proto(unix.IPPROTO_UDP), dport(egress.DNSPort), ctStatusDNAT(), verdict(expr.VerdictAccept))...)
	add(fw, join(l4proto(unix.IPPROTO_UDP), dport(443),
		[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH}})...)
	return rules
}

// EgressTarget is what the egress daemon needs of an attached sandbox.
type EgressTarget struct {
	// Sandbox is the sandbox's id; Root the network state directory of
	// its sbx root (egress.StateDir takes both).
	Sandbox, Root string
	IP            netip.Addr
	// Policy is the sandbox's policy by name (never nil).
	Policy *egress.Policy
	// DNS are the name servers the sandbox would ask (its resolv.conf).
	DNS []netip.Addr
}

// EgressLookup returns a function that finds the attached, proxied
// sandbox with an address on this bridge (from any sbx root). It re-reads
// the leases when their directory changed (every lease write renames a
// file into it), so a changed policy is seen by the next lookup.
func (n *Network) EgressLookup() func(netip.Addr) (EgressTarget, bool) {
	var mu sync.Mutex
	var stamp time.Time
	var index map[netip.Addr]EgressTarget
	return func(ip netip.Addr) (EgressTarget, bool) {
		mu.Lock()
		defer mu.Unlock()
		fi, err := os.Stat(n.leaseDir())
		if err != nil {
			return EgressTarget{}, false
		}
		if index == nil || !fi.ModTime().Equal(stamp) {
			stamp, index = fi.ModTime(), n.readEgressTargets()
		}
		t, ok := index[ip]
		return t, ok
	}
}

// readEgressTargets reads the proxied sandboxes' leases without the
// network's lock: leases are replaced by rename, so each read is whole.
func (n *Network) readEgressTargets() map[netip.Addr]EgressTarget {
	ents, _ := os.ReadDir(n.leaseDir())
	out := map[netip.Addr]EgressTarget{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue // a lease being written, or a spare (putLease)
		}
		data, err := os.ReadFile(n.leaseDir() + "/" + e.Name())
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(data, &l) != nil || l.State != stateAttached || !l.Egress.proxied() {
			continue
		}
		dns, _ := n.sandboxDNS(l.DNS)
		out[l.IP] = EgressTarget{Sandbox: l.Owner, Root: l.Root, IP: l.IP, Policy: l.Egress.Names, DNS: dns}
	}
	return out
}

// InHostNS runs f in the host's network namespace (Config.HostNetNS).
func (n *Network) InHostNS(f func() error) error {
	if n.cfg.HostNetNS == "" {
		return f()
	}
	return InNamespace(n.hostFD(), f)
}

// EgressListen is where the bridge's egress daemon listens: the bridge's
// address. The bridge must exist.
func (n *Network) EgressListen() (netip.Addr, error) {
	if err := n.readBridge(); err != nil {
		return netip.Addr{}, err
	}
	return n.gateway, nil
}

// EgressLockPath is the lock file held by the bridge's egress daemon: one
// per bridge and host namespace, whichever sbx root started it.
func (n *Network) EgressLockPath() string { return n.shared + "/egressd.lock" }

// ErrEgressLocked is LockEgress's answer while another process holds the
// bridge's egress lock.
var ErrEgressLocked = errors.New("netns: the bridge's egress lock is held")

// LockEgress takes the bridge's egress lock without waiting. The lock
// taken is the file at EgressLockPath after locking: the last sandbox's
// teardown removes the file (with the bridge's state directory), so a lock
// on a file removed meanwhile is dropped and taken again.
func (n *Network) LockEgress() (unlock func(), err error) {
	path := n.EgressLockPath()
	for tries := 0; ; tries++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open the egress lock %s: %w", path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, ErrEgressLocked
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var held, cur unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &cur) == nil && held.Ino == cur.Ino && held.Dev == cur.Dev {
			return func() { _ = f.Close() }, nil
		}
		f.Close()
		if tries >= 100 {
			return nil, fmt.Errorf("lock %s: the lock file keeps being replaced", path)
		}
	}
}

// TidyEgress removes the bridge's state directory, egress lock file
// included, if no sandbox of the bridge is left and no daemon holds the
// lock. An egress daemon calls it after giving up its lock: the last
// sandbox's teardown leaves a lock file the daemon held at the time.
func (n *Network) TidyEgress() error {
	lk, err := n.lock()
	if err != nil {
		return err
	}
	lk.unlock()
	return nil
}

// removeEgressLock removes the egress lock file unless a daemon holds it:
// the bridge's state directory can go once its last lease has.
func (n *Network) removeEgressLock() {
	f, err := os.OpenFile(n.EgressLockPath(), os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		_ = os.Remove(n.EgressLockPath())
	}
}

// ProxiedSandboxes counts the attached sandboxes of the bridge whose
// policy needs the egress daemon.
func (n *Network) ProxiedSandboxes() int { return len(n.readEgressTargets()) }
