package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// sbx keeps all of its rules in tables of its own, all named "sbx" (for a
// bridge other than sbx0: "sbx-BRIDGE"):
//
//	table inet sbx    filter: forward and input from/to the bridge; per
//	                  sandbox chains fw-KEY (egress) and in-KEY (host
//	                  services), reached through the verdict maps fwd and
//	                  hostin keyed by the sandbox address.
//	table ip sbx      NAT: masquerade for egress and for 127.0.0.1 clients,
//	                  DNAT of published ports (per sandbox chain pt-KEY,
//	                  jumped to from chain published).
//	table bridge sbx  anti-spoofing: per veth chain sp-KEY, reached through
//	                  the verdict map ports keyed by the veth name.
//
// Nothing outside these tables is read or changed.
const defaultTableName = "sbx"

// tableName is "sbx" for the default bridge and "sbx-BRIDGE" for any
// other, so two bridges in one namespace keep separate tables.
func (n *Network) tableName() string {
	if n.cfg.BridgeName == DefaultBridgeName {
		return defaultTableName
	}
	return defaultTableName + "-" + n.cfg.BridgeName
}

// Chain name prefixes of per-sandbox chains.
const (
	prefixForward = "fw-"
	prefixHostIn  = "in-"
	prefixPorts   = "pt-"
	prefixSpoof   = "sp-"
)

func (n *Network) nft() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(n.hostFD()))
	if err != nil {
		return nil, fmt.Errorf("nftables connection in host namespace: %w", err)
	}
	return c, nil
}

func (n *Network) tables() (inet, nat, bridge *nftables.Table) {
	return &nftables.Table{Name: n.tableName(), Family: nftables.TableFamilyINet},
		&nftables.Table{Name: n.tableName(), Family: nftables.TableFamilyIPv4},
		&nftables.Table{Name: n.tableName(), Family: nftables.TableFamilyBridge}
}

func fwdMap(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: "fwd", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
}

func hostInMap(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: "hostin", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
}

func portsMap(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: "ports", IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, KeyByteOrder: binaryutil.NativeEndian}
}

// ensureRules creates the sbx tables in one atomic batch unless the inet
// table exists already (then all three exist: they are only made together)
// and rebuild is false.
func (n *Network) ensureRules(rebuild bool) error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	inet, nat, br := n.tables()
	if _, err := c.ListTableOfFamily(n.tableName(), nftables.TableFamilyINet); err == nil {
		if !rebuild {
			return nil
		}
		c.DelTable(inet)
	}
	// A crash cannot leave half a setup (the batch is atomic), but a user may
	// have deleted one table by hand: start from nothing.
	for _, t := range []*nftables.Table{nat, br} {
		if _, err := c.ListTableOfFamily(n.tableName(), t.Family); err == nil {
			c.DelTable(t)
		}
	}
	bridge := n.cfg.BridgeName
	sub := n.subnet

	// table inet sbx
	c.AddTable(inet)
	fwd, hostin := fwdMap(inet), hostInMap(inet)
	if err := c.AddSet(fwd, nil); err != nil {
		return err
	}
	if err := c.AddSet(hostin, nil); err != nil {
		return err
	}
	accept := nftables.ChainPolicyAccept
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: inet, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	add := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: exprs})
	}
	add(forward, join(ctStateEstablished(), verdict(expr.VerdictAccept))...)
	add(forward, join(ifname(true, bridge, true), nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))...)
	add(forward, join(ifname(false, bridge, true), nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))...)
	add(forward, join(ifname(true, bridge, true), nfproto(unix.NFPROTO_IPV4), ipAddr(true), vmapLookup(fwd))...)
	add(forward, join(ifname(true, bridge, true), verdict(expr.VerdictDrop))...)
	add(forward, join(ifname(false, bridge, true), ctStatusDNAT(), verdict(expr.VerdictAccept))...)
	add(forward, join(ifname(false, bridge, true), verdict(expr.VerdictDrop))...)

	input := c.AddChain(&nftables.Chain{Name: "input", Table: inet, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	add(input, join(ifname(true, bridge, false), verdict(expr.VerdictAccept))...)
	// Replies to 127.0.0.1 clients of published ports are de-NATed to
	// 127.0.0.1 before input: accept known connections first, then drop
	// every new packet for loopback (route_localnet would let it in).
	add(input, join(ctStateEstablished(), verdict(expr.VerdictAccept))...)
	add(input, join(nfproto(unix.NFPROTO_IPV4), ipDaddrIn(netip.MustParsePrefix("127.0.0.0/8")), verdict(expr.VerdictDrop))...)
	add(input, join(nfproto(unix.NFPROTO_IPV4), ipAddr(true), vmapLookup(hostin))...)
	add(input, verdict(expr.VerdictDrop)...)

	// table ip sbx
	c.AddTable(nat)
	published := c.AddChain(&nftables.Chain{Name: "published", Table: nat})
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: nat, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	add(pre, join(fibDaddrLocal(), jump(published.Name))...)
	out := c.AddChain(&nftables.Chain{Name: "output", Table: nat, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	add(out, join(fibDaddrLocal(), jump(published.Name))...)
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: nat, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	add(post, join(ifname(false, bridge, true), ipSaddrIn(netip.MustParsePrefix("127.0.0.0/8")), []expr.Any{&expr.Masq{}})...)
	add(post, join(ipSaddrIn(sub), ifname(false, bridge, false), []expr.Any{&expr.Masq{}})...)

	// table bridge sbx
	c.AddTable(br)
	ports := portsMap(br)
	if err := c.AddSet(ports, nil); err != nil {
		return err
	}
	bpre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: br, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-200), Policy: &accept})
	add(bpre, join([]expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}}, []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: ports.Name, SetID: ports.ID, IsDestRegSet: true, DestRegister: 0}})...)

	if err := c.Flush(); err != nil {
		return fmt.Errorf("install sbx nftables tables in host namespace: %w", err)
	}
	return nil
}

// addSpoofGuard installs the bridge chain that lets a veth send only from
// its own MAC address (so it cannot take over another port's bridge
// forwarding entry) and its own IPv4 address (IPv4 and ARP), and nothing
// else but IPv4 and ARP.
func (n *Network) addSpoofGuard(c *nftables.Conn, key, veth string, ip netip.Addr, mac net.HardwareAddr) error {
	_, _, br := n.tables()
	ch := c.AddChain(&nftables.Chain{Name: prefixSpoof + key, Table: br})
	a := ip.As4()
	// ether saddr != MAC drop
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte(mac)},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	etherType := func(t uint16) []expr.Any {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, t)},
		}
	}
	// ether type ip ip saddr != IP drop
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: join(etherType(unix.ETH_P_IP),
		[]expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: a[:]}}, verdict(expr.VerdictDrop))})
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: join(etherType(unix.ETH_P_IP), verdict(expr.VerdictReturn))})
	// ether type arp arp saddr ip != IP drop (offset 14 in an Ethernet/IPv4 ARP packet)
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: join(etherType(unix.ETH_P_ARP),
		[]expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 14, Len: 4},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: a[:]}}, verdict(expr.VerdictDrop))})
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: join(etherType(unix.ETH_P_ARP), verdict(expr.VerdictReturn))})
	c.AddRule(&nftables.Rule{Table: br, Chain: ch, Exprs: verdict(expr.VerdictDrop)})
	return c.SetAddElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(veth), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: ch.Name}}})
}

// addSandboxRules installs the egress, host-service and published-port
// chains of one attached lease.
func (n *Network) addSandboxRules(c *nftables.Conn, l *lease, dns []netip.Addr) error {
	inet, nat, _ := n.tables()
	fw := c.AddChain(&nftables.Chain{Name: prefixForward + l.Key, Table: inet})
	in := c.AddChain(&nftables.Chain{Name: prefixHostIn + l.Key, Table: inet})
	n.addFilterRules(c, fw, in, l, dns)

	key := l.IP.As4()
	if err := c.SetAddElements(fwdMap(inet), []nftables.SetElement{{Key: key[:], VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: fw.Name}}}); err != nil {
		return err
	}
	if err := c.SetAddElements(hostInMap(inet), []nftables.SetElement{{Key: key[:], VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: in.Name}}}); err != nil {
		return err
	}

	addPortRules(c, nat, l)
	if l.Egress.proxied() {
		n.addEgressRedirect(c, l)
	}
	return nil
}

// addFilterRules adds the lease's egress policy to its forward chain fw
// and its allowed host ports to its host-input chain in.
func (n *Network) addFilterRules(c *nftables.Conn, fw, in *nftables.Chain, l *lease, dns []netip.Addr) {
	for _, r := range n.filterRules(fw, in, l, dns) {
		c.AddRule(r)
	}
}

// filterRules are the rules addFilterRules adds, in order.
func (n *Network) filterRules(fw, in *nftables.Chain, l *lease, dns []netip.Addr) []*nftables.Rule {
	var rules []*nftables.Rule
	add := func(ch *nftables.Chain, exprs ...expr.Any) {
		rules = append(rules, &nftables.Rule{Table: ch.Table, Chain: ch, Exprs: exprs})
	}
	kind := l.Egress.kind()
	if l.Egress.proxied() {
		rules = append(rules, egressFilterRules(fw, in)...)
	}
	if l.Egress.Names != nil {
		for _, p := range l.Egress.Names.DeniedCIDRs() {
			add(fw, join(ipDaddrIn(p), verdict(expr.VerdictDrop))...)
		}
	}
	if kind != EgressNone {
		// The sandbox's own name servers stay reachable, even on private
		// addresses or on the host.
		for _, d := range dns {
			for _, p := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
				add(fw, join(ipDaddrIn(netip.PrefixFrom(d, 32)), l4proto(p), dport(53), verdict(expr.VerdictAccept))...)
				add(in, join(ipDaddrIn(netip.PrefixFrom(d, 32)), l4proto(p), dport(53), verdict(expr.VerdictAccept))...)
			}
		}
	}
	switch kind {
	case EgressDefault:
		add(fw, join(ipDaddrIn(n.subnet), verdict(expr.VerdictDrop))...)
		for _, p := range blockedByDefault {
			add(fw, join(ipDaddrIn(p), verdict(expr.VerdictDrop))...)
		}
		add(fw, verdict(expr.VerdictAccept)...)
	case EgressAllowList:
		add(fw, join(ipDaddrIn(n.subnet), verdict(expr.VerdictDrop))...)
		for _, p := range l.Egress.Allow {
			add(fw, join(ipDaddrIn(p), verdict(expr.VerdictAccept))...)
		}
		add(fw, verdict(expr.VerdictDrop)...)
	case EgressNone:
		add(fw, verdict(expr.VerdictDrop)...)
	}
	for _, hp := range l.AllowHostPorts {
		add(in, join(l4proto(protoNum(hp.Proto)), dport(hp.Port), verdict(expr.VerdictAccept))...)
	}
	add(in, verdict(expr.VerdictDrop)...)
	return rules
}

// addPortRules adds the DNAT rules of the lease's published ports: a chain
// of its own, jumped to from the published chain with the lease's key as
// user data (removeLeaseRules finds them by it).
func addPortRules(c ruleWriter, nat *nftables.Table, l *lease) {
	if len(l.Ports) == 0 {
		return
	}
	key := l.IP.As4()
	pt := c.AddChain(&nftables.Chain{Name: prefixPorts + l.Key, Table: nat})
	for _, p := range l.Ports {
		var e []expr.Any
		if p.HostIP.IsValid() {
			e = append(e, ipDaddrIn(netip.PrefixFrom(p.HostIP, 32))...)
		}
		e = append(e, l4proto(protoNum(p.Proto))...)
		e = append(e, dport(p.HostPort)...)
		e = append(e,
			&expr.Immediate{Register: 1, Data: key[:]},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, p.ContainerPort)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		)
		c.AddRule(&nftables.Rule{Table: nat, Chain: pt, Exprs: e})
	}
	c.AddRule(&nftables.Rule{Table: nat, Chain: &nftables.Chain{Name: "published", Table: nat},
		Exprs: jump(pt.Name), UserData: []byte(l.Key)})
}

// removeLeaseRules deletes the rules of a lease. For a lease in a settled
// state (pooled, attached) it knows exactly what exists and deletes it in one
// batch; otherwise, or if that fails, it looks first and skips what is missing.
func (n *Network) removeLeaseRules(l *lease) error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	if l.State == statePrepared || l.State == stateAttached {
		inet, nat, br := n.tables()
		if l.State == stateAttached {
			k := l.IP.As4()
			_ = c.SetDeleteElements(fwdMap(inet), []nftables.SetElement{{Key: k[:]}})
			_ = c.SetDeleteElements(hostInMap(inet), []nftables.SetElement{{Key: k[:]}})
			if l.Egress.proxied() {
				if err := delKeyedRules(c, c, nat, "prerouting", l.Key); err != nil {
					return err
				}
				c.DelChain(&nftables.Chain{Name: prefixEgress + l.Key, Table: nat})
			}
			if len(l.Ports) > 0 {
				if err := delKeyedRules(c, c, nat, "published", l.Key); err != nil {
					return err
				}
				c.DelChain(&nftables.Chain{Name: prefixPorts + l.Key, Table: nat})
			}
			c.DelChain(&nftables.Chain{Name: prefixForward + l.Key, Table: inet})
			c.DelChain(&nftables.Chain{Name: prefixHostIn + l.Key, Table: inet})
		}
		_ = c.SetDeleteElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(l.HostVeth)}})
		c.DelChain(&nftables.Chain{Name: prefixSpoof + l.Key, Table: br})
		if c.Flush() == nil {
			return nil
		}
		if c, err = n.nft(); err != nil {
			return err
		}
	}
	return n.removeSandboxRules(c, l.Key, l.IP, l.HostVeth, true)
}

// removeSandboxRules deletes everything addSandboxRules and addSpoofGuard
// made for key (and ip); missing pieces are skipped. It flushes the batch.
func (n *Network) removeSandboxRules(c *nftables.Conn, key string, ip netip.Addr, veth string, withSpoof bool) error {
	inet, nat, br := n.tables()
	if ip.IsValid() {
		k := ip.As4()
		for _, m := range []*nftables.Set{fwdMap(inet), hostInMap(inet)} {
			if has, _ := mapHasKey(c, m, k[:]); has {
				_ = c.SetDeleteElements(m, []nftables.SetElement{{Key: k[:]}})
			}
		}
	}
	for _, ch := range []string{"published", "prerouting"} {
		_ = delKeyedRules(c, c, nat, ch, key)
	}
	if withSpoof && veth != "" {
		if has, _ := mapHasKey(c, portsMap(br), ifnameBytes(veth)); has {
			_ = c.SetDeleteElements(portsMap(br), []nftables.SetElement{{Key: ifnameBytes(veth)}})
		}
	}
	chains, err := c.ListChains()
	if err != nil {
		return fmt.Errorf("list nftables chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name != n.tableName() || !strings.HasSuffix(ch.Name, "-"+key) {
			continue
		}
		if strings.HasPrefix(ch.Name, prefixSpoof) && !withSpoof {
			continue
		}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove nftables rules of %s: %w", key, err)
	}
	return nil
}

// delKeyedRules deletes (in c's batch) the rules of chain whose user data
// is key, as lc lists them: the jumps to a sandbox's own chains.
func delKeyedRules(lc *nftables.Conn, c ruleWriter, t *nftables.Table, chain, key string) error {
	rules, err := lc.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		return fmt.Errorf("list %s rules: %w", chain, err)
	}
	for _, r := range rules {
		if string(r.UserData) == key {
			_ = c.DelRule(r)
		}
	}
	return nil
}

func mapHasKey(c *nftables.Conn, s *nftables.Set, key []byte) (bool, error) {
	els, err := c.GetSetElements(s)
	if err != nil {
		return false, err
	}
	for _, e := range els {
		if string(e.Key) == string(key) {
			return true, nil
		}
	}
	return false, nil
}

// --- expression helpers ---

func join(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

func ifnameBytes(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

// ifname matches iifname (in) or oifname against name (eq or neq).
func ifname(in bool, name string, eq bool) []expr.Any {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	op := expr.CmpOpNeq
	if eq {
		op = expr.CmpOpEq
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: ifnameBytes(name)}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func protoNum(p Proto) byte {
	if p == UDP {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

// ipAddr loads the IPv4 source (src) or destination address into register 1.
func ipAddr(src bool) []expr.Any {
	off := uint32(16)
	if src {
		off = 12
	}
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}}
}

func prefixMatch(src bool, p netip.Prefix) []expr.Any {
	mask := netipMask(p.Bits())
	a := p.Masked().Addr().As4()
	return join(ipAddr(src), []expr.Any{
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]},
	})
}

func ipDaddrIn(p netip.Prefix) []expr.Any { return prefixMatch(false, p) }
func ipSaddrIn(p netip.Prefix) []expr.Any { return prefixMatch(true, p) }

func netipMask(bits int) []byte {
	m := uint32(0)
	if bits > 0 {
		m = ^uint32(0) << (32 - bits)
	}
	return binary.BigEndian.AppendUint32(nil, m)
}

func vmapLookup(s *nftables.Set) []expr.Any {
	return []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, IsDestRegSet: true, DestRegister: 0}}
}

func ctStateEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func ctStatusDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, 0x20 /* IPS_DST_NAT */), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func fibDaddrLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)},
	}
}
