package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sbxrun/sbx"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Attachment is the network of one sandbox, as the Host needs it to start
// the sandbox and as `sbx inspect` shows it.
type Attachment struct {
	SandboxID string `json:"sandbox_id"`
	Mode      Mode   `json:"mode"`
	// NetNSPath is the prepared namespace to join (bridge mode). Empty in
	// none mode (give the sandbox a new namespace with only loopback) and
	// in host mode (give it no network namespace of its own).
	NetNSPath string       `json:"netns_path,omitempty"`
	IP        netip.Addr   `json:"ip,omitzero"`
	Gateway   netip.Addr   `json:"gateway,omitzero"`
	Subnet    netip.Prefix `json:"subnet,omitzero"`
	HostVeth  string       `json:"host_veth,omitempty"`
	// Ports are the published ports, with host ports picked for HostPort 0.
	Ports          []PortMapping `json:"ports,omitempty"`
	Egress         EgressPolicy  `json:"egress,omitzero"`
	AllowHostPorts []HostPort    `json:"allow_host_ports,omitempty"`
	DNS            []netip.Addr  `json:"dns,omitempty"`
	// ResolvConf and Hosts are the contents for the sandbox's
	// /etc/resolv.conf and /etc/hosts.
	ResolvConf string `json:"-"`
	Hosts      string `json:"-"`
	// FromPool says whether the namespace came ready from the pool.
	FromPool bool `json:"from_pool,omitempty"`
}

// Attach gives sandboxID its network. In bridge mode it takes a namespace
// from the pool (or prepares one), installs the egress policy and published
// ports, and records everything in a lease before changing the host. The
// caller should record the sandbox on disk first, so a concurrent GC counts
// it as live. On error nothing is left behind.
func (n *Network) Attach(ctx context.Context, sandboxID string, opts AttachOptions) (*Attachment, error) {
	if sandboxID == "" {
		return nil, errors.New("attach network: empty sandbox ID")
	}
	if opts.Mode == "" {
		opts.Mode = ModeNone
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hostname := opts.Hostname
	if hostname == "" {
		hostname = "sandbox"
	}
	if opts.Mode != ModeBridge {
		return LocalAttachment(sandboxID, opts.Mode, hostname, n.cfg.HostResolvConf), nil
	}

	if opts.Standby {
		defer n.restock() // for the claim of this pool member, after the lock
	}
	lk, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	if err := n.ensureBridge(); err != nil {
		return nil, err
	}
	leases, err := n.readLeases()
	if err != nil {
		return nil, err
	}
	leases = n.sweepDebris(leases)
	var l *lease
	for _, x := range leases {
		if !n.mine(x) {
			continue // another root's: its ports count (resolvePorts), nothing else
		}
		if x.Owner == sandboxID && (x.State == stateAttached || x.State == stateAttaching) {
			return nil, fmt.Errorf("sandbox %s already has a network (%s); detach it first", sandboxID, x.IP)
		}
		if l == nil && x.State == statePrepared && n.preparedUsable(x) {
			l = x
		}
	}
	fromPool := l != nil
	dns, resolv := n.sandboxDNS(opts.DNS)
	ports, socks, err := n.resolvePorts(opts.Publish, leases)
	if err != nil {
		return nil, err
	}
	defer closeHeld(socks)
	if l == nil {
		if l, err = n.prepare(sandboxID); err != nil {
			return nil, err
		}
	}
	hold, ready, err := n.startHolder(socks)
	if err == nil && hold == nil && opts.Standby {
		if hold, ready, err = n.startStandbyHolder(l); err != nil {
			// A claim starts a holder of its own then.
			n.log.Warn("no standby holder for a pool member's ports", "sandbox", sandboxID, "err", err)
			err = nil
		}
	}
	if err != nil {
		if terr := n.teardown(l); terr != nil {
			err = errors.Join(err, fmt.Errorf("clean up (run sbx gc): %w", terr))
		}
		return nil, err
	}
	defer ready.Close()
	l.Holder = hold
	l.State, l.Owner = stateAttaching, sandboxID
	l.Ports, l.Egress, l.AllowHostPorts = ports, opts.Egress, opts.AllowHostPorts
	l.DNS, l.Hostname = opts.DNS, hostname
	if l.Egress.Kind == "" {
		l.Egress.Kind = EgressDefault
	}
	fail := func(err error) (*Attachment, error) {
		if terr := n.teardown(l); terr != nil {
			err = errors.Join(err, fmt.Errorf("clean up (run sbx gc): %w", terr))
		}
		return nil, err
	}
	if err := n.writeLease(l); err != nil {
		return fail(err)
	}
	if err := releaseHolder(ready); err != nil {
		return fail(err)
	}
	c, err := n.nft()
	if err != nil {
		return fail(err)
	}
	if err := n.addSandboxRules(c, l, dns); err != nil {
		return fail(fmt.Errorf("build rules for sandbox %s: %w", sandboxID, err))
	}
	if err := c.Flush(); err != nil {
		return fail(fmt.Errorf("install rules for sandbox %s: %w", sandboxID, err))
	}
	l.State = stateAttached
	if err := n.writeLease(l); err != nil {
		return fail(err)
	}
	if opts.Standby {
		if err := n.makeSpare(l); err != nil {
			// The claim writes a new file then.
			n.log.Warn("no spare lease file for a pool member's claim", "sandbox", sandboxID, "err", err)
		}
	}
	a := n.attachment(l)
	a.ResolvConf, a.FromPool = resolv, fromPool
	return a, nil
}

func (n *Network) attachment(l *lease) *Attachment {
	dns, resolv := n.sandboxDNS(l.DNS)
	return &Attachment{
		SandboxID: l.Owner, Mode: ModeBridge, NetNSPath: l.NetNSPath,
		IP: l.IP, Gateway: n.gateway, Subnet: n.subnet, HostVeth: l.HostVeth,
		Ports: l.Ports, Egress: l.Egress, AllowHostPorts: l.AllowHostPorts, DNS: dns,
		ResolvConf: resolv, Hosts: hostsFile(l.IP, l.Hostname),
	}
}

// Lookup returns the bridged network of sandboxID, or nil if it has none.
func (n *Network) Lookup(sandboxID string) (*Attachment, error) {
	lk, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	l, err := n.findLease(sandboxID, false)
	if err != nil || l == nil {
		return nil, err
	}
	if err := n.readBridge(); err != nil {
		return nil, err
	}
	return n.attachment(l), nil
}

// Detach releases the network of sandboxID: rules, published ports, veth,
// namespace and lease. Detaching a sandbox without a bridged network (or
// twice) is not an error. If cleanup fails the lease stays for GC.
func (n *Network) Detach(ctx context.Context, sandboxID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lk, err := n.lock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	// Whatever state the lease is in: a create killed while its namespace
	// was being prepared left it preparing.
	l, err := n.findLease(sandboxID, true)
	if err != nil || l == nil {
		return err
	}
	if err := n.teardown(l); err != nil {
		return fmt.Errorf("detach network of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// prepare reserves an address and builds a namespace with its veth on the
// bridge and the anti-spoofing guard; the lease ends in state pooled. owner
// is the sandbox it is prepared for ("" for the pool), recorded from the
// first write so that Detach finds what a killed create left. Call with the
// lock held and the bridge ready.
func (n *Network) prepare(owner string) (*lease, error) {
	key := newKey()
	// Keys name veths and chains shared with other roots' sandboxes.
	for tries := 0; tries < 8; tries++ {
		if _, err := n.host.LinkByName("sbx" + key); err != nil {
			break
		}
		key = newKey()
	}
	l := &lease{Key: key, Root: n.cfg.StateDir, HostVeth: "sbx" + key, NetNSPath: filepath.Join(n.cfg.RunDir, key), State: statePreparing, Owner: owner}
	if err := n.reserveLease(l); err != nil {
		return nil, err
	}
	if err := n.build(l); err != nil {
		if terr := n.teardown(l); terr != nil {
			err = errors.Join(err, fmt.Errorf("clean up (run sbx gc): %w", terr))
		}
		return nil, err
	}
	l.State = statePrepared
	if err := n.writeLease(l); err != nil {
		_ = n.teardown(l)
		return nil, err
	}
	return l, nil
}

func (n *Network) build(l *lease) error {
	gw, bits := n.gateway, n.subnet.Bits()
	hostFD := n.hostFD()
	var mac net.HardwareAddr
	err := CreateNamespace(l.NetNSPath, func() error {
		// This runs on a thread inside the new namespace: the default
		// netlink handle talks to it.
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find loopback: %w", err)
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return fmt.Errorf("set loopback up: %w", err)
		}
		_ = writeSysctl("net/ipv6/conf/all/disable_ipv6", "1")
		_ = writeSysctl("net/ipv6/conf/default/disable_ipv6", "1")
		// A sandbox in a user namespace of its own does not own this
		// namespace, so its root's CAP_NET_BIND_SERVICE and CAP_NET_RAW
		// do not count here: as docker does for every container, any
		// user may bind ports below 1024 and ping (ICMP datagram
		// sockets).
		if err := writeSysctl("net/ipv4/ip_unprivileged_port_start", "0"); err != nil {
			return err
		}
		if err := writeSysctl("net/ipv4/ping_group_range", "0 2147483647"); err != nil {
			return err
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: l.HostVeth, PeerNamespace: netlink.NsFd(hostFD)}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("create veth pair eth0/%s: %w", l.HostVeth, err)
		}
		eth, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("find eth0: %w", err)
		}
		mac = eth.Attrs().HardwareAddr
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: l.IP.AsSlice(), Mask: net.CIDRMask(bits, 32)}}
		if err := netlink.AddrAdd(eth, addr); err != nil {
			return fmt.Errorf("address %s on eth0: %w", l.IP, err)
		}
		if err := netlink.LinkSetUp(eth); err != nil {
			return fmt.Errorf("set eth0 up: %w", err)
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	hv, err := n.host.LinkByName(l.HostVeth)
	if err != nil {
		return fmt.Errorf("find host veth %s: %w", l.HostVeth, err)
	}
	br, err := n.host.LinkByName(n.cfg.BridgeName)
	if err != nil {
		return fmt.Errorf("find bridge %s: %w", n.cfg.BridgeName, err)
	}
	if err := n.host.LinkSetMaster(hv, br); err != nil {
		return fmt.Errorf("attach %s to bridge %s: %w", l.HostVeth, n.cfg.BridgeName, err)
	}
	// Isolated bridge ports reach the host but not each other.
	if err := n.host.LinkSetIsolated(hv, true); err != nil {
		return fmt.Errorf("isolate bridge port %s: %w", l.HostVeth, err)
	}
	if err := n.host.LinkSetUp(hv); err != nil {
		return fmt.Errorf("set %s up: %w", l.HostVeth, err)
	}
	c, err := n.nft()
	if err != nil {
		return err
	}
	if err := n.addSpoofGuard(c, l.Key, l.HostVeth, l.IP, mac); err != nil {
		return fmt.Errorf("anti-spoofing rules for %s: %w", l.HostVeth, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install anti-spoofing rules for %s: %w", l.HostVeth, err)
	}
	return nil
}

// teardown removes everything of a lease and then the lease itself. Call
// with the lock held. Missing pieces are fine; on failure the lease stays.
// Rule removal and veth deletion each wait for a kernel RCU grace period, so
// they run side by side.
func (n *Network) teardown(l *lease) error {
	var ruleErr error
	var wg sync.WaitGroup
	if l.Key != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.removeLeaseRules(l); err != nil && !errors.Is(err, os.ErrNotExist) {
				ruleErr = err
			}
		}()
	}
	var ctErr error
	if l.IP.IsValid() && (l.State == stateAttached || l.State == stateAttaching) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctErr = n.forgetConnections(l.IP)
		}()
	}
	var errs []error
	if l.HostVeth != "" {
		if link, err := n.host.LinkByName(l.HostVeth); err == nil {
			if _, err := n.deleteLink(link); err != nil {
				errs = append(errs, fmt.Errorf("delete veth %s: %w", l.HostVeth, err))
			}
		}
	}
	if l.NetNSPath != "" {
		if err := RemoveNamespace(l.NetNSPath); err != nil {
			errs = append(errs, err)
		}
	}
	wg.Wait()
	if ruleErr != nil {
		errs = append(errs, ruleErr)
	}
	if ctErr != nil {
		// Not fatal: stale entries time out; but say so.
		n.log.Warn("could not delete conntrack entries of a removed sandbox", "ip", l.IP, "err", ctErr)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The ports are given back only once no rule sends them to the
	// sandbox any more.
	if err := stopHolder(l.Holder); err != nil {
		return err
	}
	if err := os.Remove(n.standbyPath(l)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the standby port holder's socket: %w", err)
	}
	return n.removeLease(l)
}

// preparedUsable checks that a pooled lease still has its namespace, and its
// veth on the bridge, in the bridge's current subnet.
func (n *Network) preparedUsable(l *lease) bool {
	if l.NetNSPath == "" || !n.subnet.Contains(l.IP) || !isNamespaceMount(l.NetNSPath) {
		return false
	}
	link, err := n.host.LinkByName(l.HostVeth)
	if err != nil {
		return false
	}
	br, err := n.host.LinkByName(n.cfg.BridgeName)
	return err == nil && link.Attrs().MasterIndex == br.Attrs().Index
}

func isNamespaceMount(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// resolvePorts checks published ports against other sandboxes' and the
// host's sockets, picks free host ports for HostPort 0, and returns the
// sockets that hold them (hold.go; the caller closes its copies), made in
// the host namespace: taken from the stock made ahead (sockstock.go) if
// it has enough, else made on a thread switched there. Call with the lock
// held.
func (n *Network) resolvePorts(req []PortMapping, leases []*lease) ([]PortMapping, []*os.File, error) {
	if len(req) == 0 {
		return nil, nil, nil
	}
	if n.cfg.HostNetNS != "" {
		out, socks, err := n.bindPorts(req, leases, n.stockedSocket)
		if !errors.Is(err, errNoStock) {
			return out, socks, err
		}
	}
	var (
		out   []PortMapping
		socks []*os.File
	)
	err := n.InHostNS(func() (err error) {
		out, socks, err = n.bindPorts(req, leases, newSocket)
		return err
	})
	return out, socks, err
}

// bindPorts is resolvePorts with the sockets sock makes.
func (n *Network) bindPorts(req []PortMapping, leases []*lease, sock socketFunc) ([]PortMapping, []*os.File, error) {
	var taken []PortMapping
	owner := map[PortMapping]string{}
	for _, l := range leases {
		if l.State == stateAttached || l.State == stateAttaching {
			for _, p := range l.Ports {
				taken = append(taken, p)
				owner[p] = l.Owner
			}
		}
	}
	out := make([]PortMapping, len(req))
	copy(out, req)
	var socks []*os.File
	err := func() error {
		for i := range out {
			p := &out[i]
			if p.HostPort != 0 {
				for _, t := range taken {
					if portsClash(*p, t) {
						return fmt.Errorf("%w: host port %s is already published by sandbox %s; choose another port or 0 for a free one", sbx.ErrPortInUse, p, owner[t])
					}
				}
				f, _, err := holdPort(*p, sock)
				if err != nil {
					return err
				}
				socks = append(socks, f)
				taken = append(taken, *p)
				continue
			}
			found := false
			for try := 0; try < 64 && !found; try++ {
				f, port, err := holdPort(*p, sock)
				if err != nil {
					return err
				}
				cand := *p
				cand.HostPort = port
				clash := false
				for _, t := range taken {
					clash = clash || portsClash(cand, t)
				}
				if clash {
					f.Close()
					continue
				}
				*p, found = cand, true
				socks = append(socks, f)
			}
			if !found {
				return fmt.Errorf("%w: no free host port found for %s", sbx.ErrPortInUse, p)
			}
			taken = append(taken, *p)
		}
		return nil
	}()
	if err != nil {
		closeHeld(socks)
		return nil, nil, err
	}
	return out, socks, nil
}

// sandboxDNS returns the name servers of a bridged sandbox and its
// resolv.conf: the --dns servers, else the host's (loopback servers are
// unreachable from a sandbox and dropped), else public fallback servers.
func (n *Network) sandboxDNS(servers []netip.Addr) ([]netip.Addr, string) {
	var other []string
	if len(servers) == 0 {
		data, _ := os.ReadFile(n.cfg.HostResolvConf)
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "nameserver" {
				if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() && !a.IsLoopback() {
					servers = append(servers, a)
				}
			} else if len(f) >= 2 && (f[0] == "search" || f[0] == "options") {
				other = append(other, strings.Join(f, " "))
			}
		}
		if len(servers) == 0 {
			servers = fallbackDNS
		}
	}
	var b strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	for _, o := range other {
		b.WriteString(o + "\n")
	}
	return servers, b.String()
}

// fallbackDNS are used, like Docker does, when the host has only loopback
// name servers and no --dns is given.
var fallbackDNS = []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("8.8.4.4")}

// NoneResolvConf is the resolv.conf of a sandbox without a network: no
// name server (the host's would only tell the sandbox about the host).
const NoneResolvConf = "# sbx: --network none: no name servers\n"

// LocalAttachment is the attachment of a sandbox in mode none or host,
// which needs no Network: its /etc/hosts and its resolver configuration.
// Mode host gets the host's (read from resolvConf, DefaultResolvConf when
// empty); mode none gets NoneResolvConf: it has no network to reach a
// name server on, and the host's addresses would only tell it about the
// host.
func LocalAttachment(sandboxID string, mode Mode, hostname, resolvConf string) *Attachment {
	if hostname == "" {
		hostname = "sandbox"
	}
	resolv := NoneResolvConf
	if mode == ModeHost {
		if resolvConf == "" {
			resolvConf = DefaultResolvConf
		}
		data, _ := os.ReadFile(resolvConf)
		resolv = string(data)
	}
	return &Attachment{SandboxID: sandboxID, Mode: mode, ResolvConf: resolv, Hosts: hostsFile(netip.Addr{}, hostname)}
}

func hostsFile(ip netip.Addr, hostname string) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if ip.IsValid() {
		fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
	} else {
		fmt.Fprintf(&b, "127.0.1.1\t%s\n", hostname)
	}
	return b.String()
}
