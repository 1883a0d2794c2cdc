package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/google/nftables"
)

// Reconfigure replaces the egress policy, the allowed host ports, the
// name servers and the hostname (of /etc/hosts) of the attached bridged
// network of sandboxID, and publishes opts.Publish, which it may only do
// while the sandbox publishes none: a warm pool's member being claimed.
// It takes the network's lock once, writes the lease once and changes
// the rules in one batch. The ports are checked as Attach checks them
// (free on the host, not published by another sandbox; 0 picks one) and
// their holder recorded with the new settings in the lease before any
// rule changes; the sandbox's forward and host-input chains then get the
// new rules in front of the old ones, with the DNAT rules of the ports, in
// one batch, so the sandbox is under either its old rules or its new
// ones, never none.
//
// Reconfigure returns once the lease records the new settings: what the
// request may be refused for (a port in use) is decided, and the returned
// Reconfiguring has the resolv.conf and hosts files of the new settings.
// The batch of rules is sent meanwhile, still under the network's lock;
// Reconfiguring.Wait says when it is done, so that a caller does other
// work of the same change in between. On error (of Reconfigure or of
// Wait) the network is as it was.
func (n *Network) Reconfigure(ctx context.Context, sandboxID string, opts AttachOptions) (*Reconfiguring, error) {
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
	unlock := true // until the goroutine replacing the rules takes the lock over
	defer func() {
		if unlock {
			lk.unlock()
		}
	}()
	if err := n.readBridge(); err != nil {
		return nil, err
	}
	leases, err := n.readLeases()
	if err != nil {
		return nil, err
	}
	var l *lease
	for _, x := range leases {
		if n.mine(x) && x.Owner == sandboxID && (x.State == stateAttached || x.State == stateAttaching) {
			l = x
		}
	}
	switch {
	case l == nil || l.State != stateAttached:
		return nil, fmt.Errorf("sandbox %s has no bridged network to reconfigure", sandboxID)
	case len(opts.Publish) > 0 && len(l.Ports) > 0:
		return nil, fmt.Errorf("sandbox %s already publishes ports", sandboxID)
	}
	ports, socks, err := n.resolvePorts(opts.Publish, leases)
	if err != nil {
		return nil, err
	}
	defer closeHeld(socks)
	// The member's standby holder takes the ports' sockets; without one
	// (or if it cannot be reached), a holder is started for them and the
	// standby one, if any, stopped once the lease records the new one.
	hold, standby := l.Holder, false
	var ready *os.File
	if len(socks) > 0 && hold != nil {
		if err := n.handToHolder(l, socks); err != nil {
			n.log.Warn("start a port holder: the standby one took no ports", "sandbox", sandboxID, "err", err)
		} else {
			standby = true
		}
	}
	var stale *holder
	staleStopped := false
	if len(socks) > 0 && !standby {
		stale = l.Holder
		if hold, ready, err = n.startHolder(socks); err != nil {
			return nil, err
		}
		defer ready.Close()
	}
	old := *l
	egress := opts.Egress
	if egress.Kind == "" {
		egress.Kind = EgressDefault
	}
	filters := !egress.equal(l.Egress) || !slices.Equal(opts.AllowHostPorts, l.AllowHostPorts) || !slices.Equal(opts.DNS, l.DNS)
	l.Egress, l.AllowHostPorts, l.DNS = egress, slices.Clone(opts.AllowHostPorts), slices.Clone(opts.DNS)
	if opts.Hostname != "" {
		l.Hostname = opts.Hostname
	}
	if len(ports) > 0 {
		l.Ports, l.Holder = ports, hold
	}
	handed := len(socks) > 0
	undo := func(err error) error {
		if handed {
			// The holder that took the ports goes; the lease keeps the
			// standby one only if it still runs without them.
			if serr := stopHolder(hold); serr != nil {
				err = errors.Join(err, serr)
			}
			if standby || staleStopped {
				old.Holder = nil
			}
		}
		*l = old
		if werr := n.writeLease(l); werr != nil {
			err = errors.Join(err, werr)
		}
		return err
	}
	if err := n.writeLease(l); err != nil {
		return nil, undo(err)
	}
	if err := releaseHolder(ready); err != nil {
		return nil, undo(err)
	}
	if stale != nil {
		staleStopped = true
		if err := stopHolder(stale); err != nil {
			n.log.Warn("stop the standby port holder", "sandbox", sandboxID, "err", err)
		}
	}
	r := &Reconfiguring{Attachment: n.attachment(l), done: make(chan error, 1)}
	if !filters && len(ports) == 0 {
		r.done <- nil
		return r, nil
	}
	unlock = false
	go func() {
		defer lk.unlock()
		if err := n.replaceRules(&old, l, filters); err != nil {
			r.done <- undo(err)
			return
		}
		r.done <- nil
	}()
	return r, nil
}

// Reconfiguring is a Reconfigure whose lease is written and whose rules
// are being replaced.
type Reconfiguring struct {
	// Attachment is the network with its new settings: the resolv.conf
	// and hosts files to write into the sandbox.
	*Attachment
	done chan error
}

// Wait waits until the sandbox's rules are the new ones, or, on error,
// the network is as it was before Reconfigure. Call it once.
func (r *Reconfiguring) Wait() error { return <-r.done }

// replaceRules puts the filter rules of l (if filters) and the DNAT rules
// of its ports in front of its old ones, in one batch; the egress redirect
// changes from old's to l's in the same batch.
func (n *Network) replaceRules(old, l *lease, filters bool) error {
	c, err := n.nft()
	if err != nil {
		return err
	}
	inet, nat, _ := n.tables()
	if filters {
		fw := &nftables.Chain{Name: prefixForward + l.Key, Table: inet}
		in := &nftables.Chain{Name: prefixHostIn + l.Key, Table: inet}
		// The new rules go in front of the old ones, which they make
		// unreachable: each chain's rules end in a verdict for every
		// packet. Deleting rules costs the kernel an RCU grace period (10
		// ms and more on a busy host); the old ones go with the chains
		// when the sandbox's network is detached.
		dns, _ := n.sandboxDNS(l.DNS)
		rules := n.filterRules(fw, in, l, dns)
		for i := len(rules) - 1; i >= 0; i-- {
			c.InsertRule(rules[i])
		}
		if err := n.replaceEgressRedirect(c, old, l); err != nil {
			return err
		}
	}
	addPortRules(c, nat, l)
	if err := c.Flush(); err != nil { // one batch: all or nothing
		return fmt.Errorf("replace the rules of sandbox %s: %w", l.Owner, err)
	}
	return nil
}
