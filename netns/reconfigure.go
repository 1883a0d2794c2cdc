package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

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
// Reconfigure returns once what the request may be refused for (a port in
// use) is decided, before anything changed: the returned Reconfiguring has
// the resolv.conf and hosts files of the new settings and holds the
// network's lock and the ports' sockets. Its Apply makes the change in
// the background (the ports handed to their holder, the lease written,
// then the batch of rules), so that a caller does other work of the same
// change in between, and Wait says when it is done; Abort gives the
// change up instead. On error (of Reconfigure or of Wait) and after Abort
// the network is as it was.
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
	unlock := true // until the goroutine applying the change takes the lock over
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
		l.Ports = ports
	}
	r := &Reconfiguring{Attachment: n.attachment(l), done: make(chan error, 1)}
	r.apply = func() {
		go func() {
			defer lk.unlock()
			defer closeHeld(socks)
			r.done <- n.applyReconfigure(&old, l, socks, filters)
		}()
	}
	r.abort = func() {
		closeHeld(socks)
		lk.unlock()
	}
	unlock = false
	return r, nil
}

// applyReconfigure makes the network of lease l (old before Reconfigure
// changed it in memory) what l says: the ports' sockets socks handed to
// a holder (the standby one, or one started for them), the lease written,
// then, if the filters or the ports change, the rules replaced. On error
// the lease and the holders are as in old.
func (n *Network) applyReconfigure(old, l *lease, socks []*os.File, filters bool) error {
	// The member's standby holder takes the ports' sockets; without one
	// (or if it cannot be reached), a holder is started for them and the
	// standby one, if any, stopped once the lease records the new one.
	hold, standby := old.Holder, false
	var ready *os.File
	if len(socks) > 0 && hold != nil {
		if err := n.handToHolder(old, socks); err != nil {
			n.log.Warn("start a port holder: the standby one took no ports", "sandbox", l.Owner, "err", err)
		} else {
			standby = true
		}
	}
	var stale *holder
	staleStopped := false
	if len(socks) > 0 && !standby {
		stale = old.Holder
		var err error
		if hold, ready, err = n.startHolder(socks); err != nil {
			*l = *old
			return err
		}
		defer ready.Close()
	}
	if len(socks) > 0 {
		l.Holder = hold
	}
	handed := len(socks) > 0
	undo := func(err error) error {
		restored := *old
		if handed {
			// The holder that took the ports goes; the lease keeps the
			// standby one only if it still runs without them.
			if serr := stopHolder(hold); serr != nil {
				err = errors.Join(err, serr)
			}
			if standby || staleStopped {
				restored.Holder = nil
			}
		}
		*l = restored
		if werr := n.writeLease(l); werr != nil {
			err = errors.Join(err, werr)
		}
		return err
	}
	if err := n.writeLease(l); err != nil {
		return undo(err)
	}
	if err := releaseHolder(ready); err != nil {
		return undo(err)
	}
	if stale != nil {
		staleStopped = true
		if err := stopHolder(stale); err != nil {
			n.log.Warn("stop the standby port holder", "sandbox", l.Owner, "err", err)
		}
	}
	if !filters && len(socks) == 0 {
		return nil
	}
	if err := n.replaceRules(old, l, filters); err != nil {
		return undo(err)
	}
	return nil
}

// Reconfiguring is a Reconfigure whose ports are chosen: Apply or Abort
// it, once.
type Reconfiguring struct {
	// Attachment is the network with its new settings: the resolv.conf
	// and hosts files to write into the sandbox.
	*Attachment
	done         chan error
	once         sync.Once
	apply, abort func()
}

// Apply starts the change: the ports handed to their holder, the lease
// written, the rules replaced. Wait says when it is done.
func (r *Reconfiguring) Apply() { r.once.Do(r.apply) }

// Abort gives up a change not applied: the ports are let go and the
// network's lock released, nothing having changed. After Apply it does
// nothing.
func (r *Reconfiguring) Abort() { r.once.Do(r.abort) }

// Wait applies the change if Apply was not called, and waits until the
// sandbox's rules are the new ones, or, on error, the network is as it
// was before Reconfigure. Call it once, and not after Abort.
func (r *Reconfiguring) Wait() error {
	r.Apply()
	return <-r.done
}

// replaceRules puts the filter rules of l (if filters) and the DNAT rules
// of its ports in front of its old ones, in one batch; the egress redirect
// changes from old's to l's in the same batch.
func (n *Network) replaceRules(old, l *lease, filters bool) error {
	c := &ruleBatch{}
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
	if err := n.sendBatch(c); err != nil { // one batch: all or nothing
		return fmt.Errorf("replace the rules of sandbox %s: %w", l.Owner, err)
	}
	return nil
}
