package netns

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
)

// Reconfigure replaces the egress policy, the allowed host ports, the
// name servers and the hostname (of /etc/hosts) of the attached bridged
// network of sandboxID: a warm pool's member being claimed. The new
// settings are recorded in the lease first; the sandbox's forward and
// host-input chains then get the new rules in front of the old ones in
// one batch, so the sandbox is under either its old rules or its new
// ones, never none. On
// error the network is as it was. The returned attachment has the
// resolv.conf and hosts files of the new settings.
func (n *Network) Reconfigure(ctx context.Context, sandboxID string, opts AttachOptions) (*Attachment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	lk, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	if err := n.readBridge(); err != nil {
		return nil, err
	}
	l, err := n.findLease(sandboxID, false)
	if err != nil {
		return nil, err
	}
	if l == nil || l.State != stateAttached {
		return nil, fmt.Errorf("sandbox %s has no bridged network to reconfigure", sandboxID)
	}
	old := *l
	l.Egress, l.AllowHostPorts, l.DNS = opts.Egress, slices.Clone(opts.AllowHostPorts), slices.Clone(opts.DNS)
	if l.Egress.Kind == "" {
		l.Egress.Kind = EgressDefault
	}
	if opts.Hostname != "" {
		l.Hostname = opts.Hostname
	}
	undo := func(err error) (*Attachment, error) {
		*l = old
		if werr := n.writeLease(l); werr != nil {
			err = errors.Join(err, werr)
		}
		return nil, err
	}
	if err := n.writeLease(l); err != nil {
		return undo(err)
	}
	c, err := n.nft()
	if err != nil {
		return undo(err)
	}
	inet, _, _ := n.tables()
	fw := &nftables.Chain{Name: prefixForward + l.Key, Table: inet}
	in := &nftables.Chain{Name: prefixHostIn + l.Key, Table: inet}
	// The new rules go in front of the old ones, which they make
	// unreachable: each chain's rules end in a verdict for every packet.
	// Deleting rules costs the kernel an RCU grace period (10 ms and more
	// on a busy host); the old ones go with the chains when the sandbox's
	// network is detached.
	dns, _ := n.sandboxDNS(l.DNS)
	rules := n.filterRules(fw, in, l, dns)
	for i := len(rules) - 1; i >= 0; i-- {
		c.InsertRule(rules[i])
	}
	if err := c.Flush(); err != nil { // one batch: all or nothing
		return undo(fmt.Errorf("replace the rules of sandbox %s: %w", sandboxID, err))
	}
	return n.attachment(l), nil
}
