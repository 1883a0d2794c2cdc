package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A claim changes a sandbox's rules on its critical path, so its batch
// (ruleBatch) goes to the kernel on a netlink socket the Network keeps
// open in the host namespace (made once, not per batch, which costs a
// namespace switch and a socket), with two plain system calls (a send,
// then a read of the answer, already queued when the send returns: no
// poller or goroutine of a netlink library), and asks for less than
// nftables.Conn does: no echo of every rule added (the kernel would build each rule's
// notification and the caller read it back) and no acknowledgement per
// message, only one of the batch's last message. The kernel handles a
// batch within the send: it checks every message, then commits all of
// them or none, and only then answers, with an error for each message
// that failed (sent whether asked for or not), an error of the commit,
// and the acknowledgements asked for. So an acknowledgement of the last
// message without an error before it means the batch is in; any error
// means none of it is.

// ruleBatch is a batch of chain and rule changes for Network.sendBatch.
// It has the methods of nftables.Conn that the rules of one lease use
// (ruleWriter), for regular chains only.
type ruleBatch struct {
	msgs []netlink.Message
	err  error // the first error building the batch
}

// ruleWriter is what adds and removes the chains and rules of one lease:
// an nftables.Conn or a ruleBatch.
type ruleWriter interface {
	AddChain(*nftables.Chain) *nftables.Chain
	DelChain(*nftables.Chain)
	FlushChain(*nftables.Chain)
	AddRule(*nftables.Rule) *nftables.Rule
	InsertRule(*nftables.Rule) *nftables.Rule
	DelRule(*nftables.Rule) error
}

var (
	_ ruleWriter = (*nftables.Conn)(nil)
	_ ruleWriter = (*ruleBatch)(nil)
)

func (b *ruleBatch) add(typ uint16, flags netlink.HeaderFlags, family nftables.TableFamily, attrs []netlink.Attribute) {
	if b.err != nil {
		return
	}
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		b.err = fmt.Errorf("encode an nftables message: %w", err)
		return
	}
	b.msgs = append(b.msgs, netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: netlink.Request | flags},
		Data:   append(nfgenHeader(byte(family), 0), data...),
	})
}

// nfgenHeader is the nfgenmsg in front of every nfnetlink message.
func nfgenHeader(family byte, resID uint16) []byte {
	return binary.BigEndian.AppendUint16([]byte{family, unix.NFNETLINK_V0}, resID)
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// AddChain adds a regular chain (one without a hook).
func (b *ruleBatch) AddChain(c *nftables.Chain) *nftables.Chain {
	if c.Hooknum != nil || c.Type != "" || c.Policy != nil {
		b.err = errors.Join(b.err, fmt.Errorf("base chain %s: not in a claim's batch", c.Name))
		return c
	}
	b.add(unix.NFT_MSG_NEWCHAIN, netlink.Create, c.Table.Family, []netlink.Attribute{
		{Type: unix.NFTA_CHAIN_TABLE, Data: cstr(c.Table.Name)},
		{Type: unix.NFTA_CHAIN_NAME, Data: cstr(c.Name)},
	})
	return c
}

// DelChain deletes a chain, which must have no rules.
func (b *ruleBatch) DelChain(c *nftables.Chain) {
	b.add(unix.NFT_MSG_DELCHAIN, 0, c.Table.Family, []netlink.Attribute{
		{Type: unix.NFTA_CHAIN_TABLE, Data: cstr(c.Table.Name)},
		{Type: unix.NFTA_CHAIN_NAME, Data: cstr(c.Name)},
	})
}

// FlushChain deletes every rule of a chain.
func (b *ruleBatch) FlushChain(c *nftables.Chain) {
	b.add(unix.NFT_MSG_DELRULE, 0, c.Table.Family, []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: cstr(c.Table.Name)},
		{Type: unix.NFTA_RULE_CHAIN, Data: cstr(c.Name)},
	})
}

// AddRule appends a rule to its chain.
func (b *ruleBatch) AddRule(r *nftables.Rule) *nftables.Rule {
	b.rule(r, netlink.Create|unix.NLM_F_APPEND)
	return r
}

// InsertRule puts a rule in front of its chain's.
func (b *ruleBatch) InsertRule(r *nftables.Rule) *nftables.Rule {
	b.rule(r, netlink.Create)
	return r
}

// DelRule deletes the rule with r's handle.
func (b *ruleBatch) DelRule(r *nftables.Rule) error {
	if r.Handle == 0 {
		return errors.New("delete a rule: no handle")
	}
	b.add(unix.NFT_MSG_DELRULE, 0, r.Table.Family, []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: cstr(r.Table.Name)},
		{Type: unix.NFTA_RULE_CHAIN, Data: cstr(r.Chain.Name)},
		{Type: unix.NFTA_RULE_HANDLE, Data: binary.BigEndian.AppendUint64(nil, r.Handle)},
	})
	return nil
}

// rule adds a new rule (no handle, no position: at the chain's head or,
// with NLM_F_APPEND, its end) with its expressions and user data.
func (b *ruleBatch) rule(r *nftables.Rule, flags netlink.HeaderFlags) {
	if r.Handle != 0 || r.Position != 0 {
		b.err = errors.Join(b.err, errors.New("a rule with a handle or a position: not in a claim's batch"))
		return
	}
	exprs := make([]netlink.Attribute, 0, len(r.Exprs))
	for _, e := range r.Exprs {
		data, err := expr.Marshal(byte(r.Table.Family), e)
		if err != nil {
			b.err = errors.Join(b.err, fmt.Errorf("encode a rule of chain %s: %w", r.Chain.Name, err))
			return
		}
		exprs = append(exprs, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: data})
	}
	list, err := netlink.MarshalAttributes(exprs)
	if err != nil {
		b.err = errors.Join(b.err, fmt.Errorf("encode a rule of chain %s: %w", r.Chain.Name, err))
		return
	}
	attrs := []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: cstr(r.Table.Name)},
		{Type: unix.NFTA_RULE_CHAIN, Data: cstr(r.Chain.Name)},
		{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: list},
	}
	if r.UserData != nil {
		attrs = append(attrs, netlink.Attribute{Type: unix.NFTA_RULE_USERDATA, Data: r.UserData})
	}
	b.add(unix.NFT_MSG_NEWRULE, flags, r.Table.Family, attrs)
}

// batchTimeout bounds the wait for the kernel's answer to a batch, which
// it has sent by the time the send returns: only a broken socket waits.
const batchTimeout = 10 * time.Second

// nfnlSocket is a netlink socket for nftables batches in the host
// namespace, used with plain system calls: a blocking send of the whole
// batch, which the kernel handles within the call, and a blocking read of
// its answer, already queued by then (no poller, no goroutine).
type nfnlSocket struct {
	fd  int
	seq uint32 // of the last message sent
}

func (s *nfnlSocket) close() { _ = unix.Close(s.fd) }

// sendBatch sends b as one batch, all or nothing, on the Network's
// netlink socket, and returns once the kernel has committed it (nil) or
// refused all of it (an error). A socket that saw an error is closed,
// never used again: it may hold answers of that batch.
func (n *Network) sendBatch(b *ruleBatch) error {
	if b.err != nil {
		return b.err
	}
	if len(b.msgs) == 0 {
		return nil
	}
	s, err := n.nfnetlink()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		s.close()
		return err
	}
	last, err := s.send(b.msgs)
	if err != nil {
		return fail(fmt.Errorf("send an nftables batch: %w", err))
	}
	buf := make([]byte, 8192)
	for {
		m, from, err := unix.Recvfrom(s.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("read the answer to an nftables batch: %w", err))
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not the kernel's
		}
		replies, err := syscall.ParseNetlinkMessage(buf[:m])
		if err != nil {
			return fail(fmt.Errorf("read the answer to an nftables batch: %w", err))
		}
		for _, r := range replies {
			if r.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(r.Data) < 4 {
				return fail(errors.New("nftables batch: a short error message"))
			}
			// The first error the kernel sent: the batch was refused,
			// none of it is in.
			if e := int32(binary.NativeEndian.Uint32(r.Data)); e != 0 {
				return fail(fmt.Errorf("nftables batch: %w", syscall.Errno(-e)))
			}
			if r.Header.Seq == last {
				n.keepNFNetlink(s)
				return nil
			}
		}
	}
}

// send sends msgs between the messages that begin and end a batch, with
// an acknowledgement asked of the last of msgs, whose sequence number it
// returns.
func (s *nfnlSocket) send(msgs []netlink.Message) (uint32, error) {
	size := 2 * (unix.NLMSG_HDRLEN + 4)
	for _, m := range msgs {
		size += unix.NLMSG_HDRLEN + nlAlign(len(m.Data))
	}
	buf := make([]byte, 0, size)
	put := func(typ netlink.HeaderType, flags netlink.HeaderFlags, data []byte) {
		s.seq++
		buf = binary.NativeEndian.AppendUint32(buf, uint32(unix.NLMSG_HDRLEN+len(data)))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(typ))
		buf = binary.NativeEndian.AppendUint16(buf, uint16(flags|netlink.Request))
		buf = binary.NativeEndian.AppendUint32(buf, s.seq)
		buf = binary.NativeEndian.AppendUint32(buf, 0)
		buf = append(buf, data...)
		buf = append(buf, make([]byte, nlAlign(len(data))-len(data))...)
	}
	edge := nfgenHeader(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)
	put(unix.NFNL_MSG_BATCH_BEGIN, 0, edge)
	for i, m := range msgs {
		flags := m.Header.Flags
		if i == len(msgs)-1 {
			flags |= netlink.Acknowledge
		}
		put(m.Header.Type, flags, m.Data)
	}
	last := s.seq
	put(unix.NFNL_MSG_BATCH_END, 0, edge)
	for {
		err := unix.Sendto(s.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if !errors.Is(err, unix.EINTR) {
			return last, err
		}
	}
}

// nlAlign rounds a netlink message's length up to its 4-byte alignment.
func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// nfnetlink returns the Network's netlink socket for nftables batches in
// the host namespace (made if it has none): the caller has it alone until
// it gives it back (keepNFNetlink) or closes it.
func (n *Network) nfnetlink() (*nfnlSocket, error) {
	select {
	case s := <-n.nfnl:
		return s, nil
	default:
	}
	var fd int
	err := n.InHostNS(func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables socket in the host namespace: %w", err)
	}
	s := &nfnlSocket{fd: fd}
	tv := unix.NsecToTimeval(batchTimeout.Nanoseconds())
	if err := errors.Join(
		unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		// Errors without a copy of the message they answer.
		unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1),
	); err != nil {
		s.close()
		return nil, fmt.Errorf("nftables socket in the host namespace: %w", err)
	}
	return s, nil
}

// keepNFNetlink gives back a socket nfnetlink returned, after a batch
// that left nothing to read on it.
func (n *Network) keepNFNetlink(s *nfnlSocket) {
	select {
	case n.nfnl <- s:
	default:
		s.close() // another batch made one meanwhile, which is kept
	}
}
