package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A claim changes a sandbox's rules on its critical path, so its batch
// (ruleBatch) goes to the kernel on a netlink socket the Network keeps
// open in the host namespace (dialled once, not per batch, which costs a
// namespace switch and a socket), and asks for less than nftables.Conn
// does: no echo of every rule added (the kernel would build each rule's
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
	c, err := n.nfnetlink()
	if err != nil {
		return err
	}
	msgs := make([]netlink.Message, 0, len(b.msgs)+2)
	msgs = append(msgs, netlink.Message{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_BEGIN, Flags: netlink.Request}, Data: nfgenHeader(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)})
	msgs = append(msgs, b.msgs...)
	msgs[len(msgs)-1].Header.Flags |= netlink.Acknowledge
	msgs = append(msgs, netlink.Message{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_END, Flags: netlink.Request}, Data: nfgenHeader(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)})
	fail := func(err error) error {
		_ = c.Close()
		return err
	}
	sent, err := c.SendMessages(msgs)
	if err != nil {
		return fail(fmt.Errorf("send an nftables batch: %w", err))
	}
	last := sent[len(sent)-2].Header.Sequence
	if err := c.SetReadDeadline(time.Now().Add(batchTimeout)); err != nil {
		return fail(fmt.Errorf("read the answer to an nftables batch: %w", err))
	}
	for {
		// Receive returns the first error the kernel sent: the batch
		// was refused, none of it is in.
		replies, err := c.Receive()
		if err != nil {
			return fail(fmt.Errorf("nftables batch: %w", err))
		}
		for _, m := range replies {
			if m.Header.Type == netlink.Error && m.Header.Sequence == last {
				n.keepNFNetlink(c)
				return nil
			}
		}
	}
}

// nfnetlink returns the Network's netlink socket for nftables batches in
// the host namespace (dialled if it has none): the caller has it alone
// until it gives it back (keepNFNetlink) or closes it.
func (n *Network) nfnetlink() (*netlink.Conn, error) {
	select {
	case c := <-n.nfnl:
		return c, nil
	default:
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.hostFD()})
	if err != nil {
		return nil, fmt.Errorf("nftables socket in the host namespace: %w", err)
	}
	return c, nil
}

// keepNFNetlink gives back a socket nfnetlink returned, after a batch
// that left nothing to read on it.
func (n *Network) keepNFNetlink(c *netlink.Conn) {
	select {
	case n.nfnl <- c:
	default:
		_ = c.Close() // another batch dialled one meanwhile, which is kept
	}
}
