package egressd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/sbxrun/sbx/egress"
)

// upstreamTimeout bounds one exchange with an upstream name server.
const upstreamTimeout = 3 * time.Second

// maxTTL caps the TTL of forwarded answers, so a changed policy or
// record is seen soon.
const maxTTL = 60

// exchange sends q to the upstream servers in turn and returns the
// first answer.
func (d *Daemon) exchange(ctx context.Context, upstream []netip.AddrPort, q *dns.Msg) (*dns.Msg, error) {
	if len(upstream) == 0 {
		return nil, errors.New("no upstream name server; give the sandbox --dns or the host a resolv.conf")
	}
	var errs []error
	for _, u := range upstream {
		r, err := d.exchangeOne(ctx, "udp", u, q)
		if err == nil && r.Truncated {
			r, err = d.exchangeOne(ctx, "tcp", u, q)
		}
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return nil, fmt.Errorf("ask upstream name servers: %w", errors.Join(errs...))
}

// exchangeOne asks one server over network, from the host namespace.
func (d *Daemon) exchangeOne(ctx context.Context, network string, u netip.AddrPort, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	conn, err := d.dialHost(ctx, network, u)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := &dns.Client{Net: network, Timeout: upstreamTimeout}
	r, _, err := c.ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: conn})
	return r, err
}

// lookupA resolves name to its public IPv4 addresses (following the
// CNAME chain upstream gives), dropping every address that is private or
// that the policy denies.
func (d *Daemon) lookupA(ctx context.Context, t *Target, name string) ([]netip.Addr, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	q.RecursionDesired = true
	r, err := d.exchange(ctx, t.Upstream, q)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("resolve %s: %s", name, dns.RcodeToString[r.Rcode])
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ip, ok := netip.AddrFromSlice(a.A)
			if ok && publicAllowed(t.Policy, ip.Unmap()) {
				out = append(out, ip.Unmap())
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: no public address that the policy allows", name)
	}
	return out, nil
}

// publicAllowed reports whether a name may lead to address a: it is not
// private, link-local, metadata or reserved, and no deny entry covers it.
func publicAllowed(p *egress.Policy, a netip.Addr) bool {
	return !egress.PrivateAddr(a) && !p.DeniedAddr(a)
}

// serveDNS answers one query from a sandbox.
func (d *Daemon) serveDNS(w dns.ResponseWriter, q *dns.Msg) {
	reply := func(m *dns.Msg) { _ = w.WriteMsg(m) }
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	src := addrOf(w.RemoteAddr())
	t, ok := d.cfg.Lookup(src)
	if !ok || len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeRefused
		reply(m)
		return
	}
	question := q.Question[0]
	name, valid := egress.NormalizeName(question.Name)
	ev := egress.AuditEvent{Sandbox: t.Sandbox.ID, Kind: "dns", Name: strings.TrimSuffix(strings.ToLower(question.Name), ".")}
	if !valid || question.Qclass != dns.ClassINET || !t.Policy.ResolveName(name) {
		m.Rcode = dns.RcodeRefused
		ev.Decision, ev.Reason = "deny", "name not allowed"
		d.audit(ev)
		reply(m)
		return
	}
	if question.Qtype != dns.TypeA {
		// NODATA for everything else: AAAA (the bridge is IPv4 only),
		// HTTPS/SVCB (which would carry ECH keys), TXT, MX...
		reply(m)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*upstreamTimeout)
	defer cancel()
	up := new(dns.Msg)
	up.SetQuestion(dns.Fqdn(name), dns.TypeA)
	up.RecursionDesired = true
	r, err := d.exchange(ctx, t.Upstream, up)
	if err != nil {
		d.log.Debug("egress dns upstream failed", "name", name, "err", err)
		m.Rcode = dns.RcodeServerFailure
		reply(m)
		return
	}
	m.Rcode = r.Rcode
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			ip, ok := netip.AddrFromSlice(rr.A)
			if !ok || !publicAllowed(t.Policy, ip.Unmap()) {
				continue
			}
		case *dns.CNAME:
		default:
			continue
		}
		rr = dns.Copy(rr)
		rr.Header().Ttl = min(rr.Header().Ttl, maxTTL)
		m.Answer = append(m.Answer, rr)
	}
	reply(m)
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}
