package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
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
// network's lock and the ports' sockets. Its Apply makes the change (the
// ports handed to their holder, the lease written, then the batch of
// rules) on the calling goroutine, and Wait returns how it went; Abort
// gives the change up instead. On error (of Reconfigure or of Wait) and
// after Abort the network is as it was.
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
	// Only the leases that name the sandbox, and, to check new ports
	// against, those that publish ports, are decoded.
	owner := []byte(strconv.Quote(sandboxID))
	leases, err := n.readLeasesMatching(func(data []byte) bool {
		return bytes.Contains(data, owner) || len(opts.Publish) > 0 && bytes.Contains(data, []byte(`"ports"`))
	})
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
	l.Egress, l.AllowHostPorts, l.DNS = egress, slices.Clone(opts.AllowHostPorts), slices.Clone(opts.DNS)
	if opts.Hostname != "" {
		l.Hostname = opts.Hostname
	}
	if len(ports) > 0 {
		l.Ports = ports
	}
	r := &Reconfiguring{Attachment: n.attachment(l)}
	// The batch of rules is made now, while the caller waits for other
	// work anyway: applying sends it as it is.
	batch, err := n.replaceRules(&old, l, r.DNS)
	if err != nil {
		closeHeld(socks)
		return nil, err
	}
	// The lease stays (the lock's holder alone removes leases): the lock
	// is released without looking for an empty lease directory. The old
	// lease, when written in the lease's spare file, stays there (never
	// read again) and the standby holder's socket too, until the lease
	// goes; a staged file is removed before the lock goes.
	//
	// The change is made on the caller's goroutine, not handed to another:
	// a claim applies it while its namespace thread personalises the
	// sandbox, and on a busy host a new goroutine waits for a free thread
	// (both may be busy) longer than the change takes.
	r.apply = func() {
		var leftover []string
		r.err = n.applyReconfigure(&old, l, socks, batch, &leftover)
		// This process's copies of the sockets go before Wait returns:
		// after a failed change the port is free for the caller's next
		// try (a cold create of the same sandbox).
		closeHeld(socks)
		for _, f := range leftover {
			_ = os.Remove(f)
		}
		lk.release()
		if len(socks) > 0 && n.cfg.HostNetNS != "" {
			n.restockLater() // for the next claim, off this one's path
		}
	}
	r.abort = func() {
		closeHeld(socks)
		lk.release()
	}
	unlock = false
	return r, nil
}

// applyReconfigure makes the network of lease l (old before Reconfigure
// changed it in memory) what l says: the ports' sockets socks handed to
// a holder (the standby one, which old names already, or one started for
// them and recorded in l), the lease written, then the rules' batch sent.
// It adds to *leftover the files for the caller to remove (the old lease
// file, unless it stays in the lease's spare file). On error the lease and
// the holders are as in old.
func (n *Network) applyReconfigure(old, l *lease, socks []*os.File, batch *ruleBatch, leftover *[]string) error {
	var (
		hold         *holder // the holder that took the ports
		started      bool    // hold was started for them
		staleStopped bool    // and old's standby holder stopped
		ready        *os.File
	)
	defer func() {
		if ready != nil {
			ready.Close()
		}
	}()
	undo := func(err error) error {
		restored := *old
		if hold != nil {
			// The holder that took the ports goes; the lease keeps the
			// standby one only if it still runs without them.
			if serr := stopHolder(hold); serr != nil {
				err = errors.Join(err, serr)
			}
			if !started || staleStopped {
				restored.Holder = nil
			}
		}
		*l = restored
		if werr := n.writeLease(l); werr != nil {
			err = errors.Join(err, werr)
		}
		return err
	}
	// Without a standby holder, one is started for the ports first, to be
	// recorded in the lease.
	startHolder := func() error {
		h, w, err := n.startHolder(socks)
		if err != nil {
			return err
		}
		hold, started, ready, l.Holder = h, true, w, h
		return nil
	}
	if len(socks) > 0 && old.Holder != nil {
		if err := n.handToHolder(old, socks); err != nil {
			n.log.Warn("start a port holder: the standby one took no ports", "sandbox", l.Owner, "err", err)
		} else {
			// The standby holder's socket, of no more use, goes with the
			// lease (teardown): removing a file costs as much as writing
			// one on a busy disk.
			hold = old.Holder
		}
	}
	if len(socks) > 0 && hold == nil {
		// No standby holder took the ports: one is started for them (and
		// the standby one, if any, stopped once the lease records the new
		// one).
		if err := startHolder(); err != nil {
			*l = *old
			return err
		}
	}
	staged, err := n.putLease(l)
	if staged != "" && (err != nil || staged != n.sparePath(l)) {
		*leftover = append(*leftover, staged)
	}
	if err != nil {
		return undo(err)
	}
	if err := releaseHolder(ready); err != nil {
		return undo(err)
	}
	ready = nil
	if started && old.Holder != nil {
		staleStopped = true
		if err := stopHolder(old.Holder); err != nil {
			n.log.Warn("stop the standby port holder", "sandbox", l.Owner, "err", err)
		}
	}
	if err := n.sendBatch(batch); err != nil { // one batch: all or nothing
		return undo(fmt.Errorf("replace the rules of sandbox %s: %w", l.Owner, err))
	}
	return nil
}

// Reconfiguring is a Reconfigure whose ports are chosen: Apply or Abort
// it, once.
type Reconfiguring struct {
	// Attachment is the network with its new settings: the resolv.conf
	// and hosts files to write into the sandbox.
	*Attachment
	err          error // of Apply
	once         sync.Once
	apply, abort func()
}

// Apply makes the change on the calling goroutine: the ports handed to
// their holder, the lease written, the rules replaced. Wait returns how
// it went.
func (r *Reconfiguring) Apply() { r.once.Do(r.apply) }

// Abort gives up a change not applied: the ports are let go and the
// network's lock released, nothing having changed. After Apply it does
// nothing.
func (r *Reconfiguring) Abort() { r.once.Do(r.abort) }

// Wait applies the change if Apply was not called, and returns nil once
// the sandbox's rules are the new ones, or an error with the network as
// it was before Reconfigure. Call it once, and not after Abort.
func (r *Reconfiguring) Wait() error {
	r.Apply()
	return r.err
}

// replaceRules makes the batch that gives lease l (old before) its new
// rules: the filter rules of each of its chains whose rules change
// (forward: the egress policy and name servers dns; host input: the
// allowed host ports, name servers and whether the policy is proxied or
// none), put in front of the old ones, the egress redirect changed from
// old's to l's, and the DNAT rules of its new ports. Nothing is sent.
func (n *Network) replaceRules(old, l *lease, dns []netip.Addr) (*ruleBatch, error) {
	c := &ruleBatch{}
	inet, nat, _ := n.tables()
	sameDNS := slices.Equal(old.DNS, l.DNS)
	forward := !sameDNS || !old.Egress.equal(l.Egress)
	hostIn := !sameDNS || !slices.Equal(old.AllowHostPorts, l.AllowHostPorts) ||
		old.Egress.proxied() != l.Egress.proxied() || (old.Egress.kind() == EgressNone) != (l.Egress.kind() == EgressNone)
	if forward || hostIn {
		fw := &nftables.Chain{Name: prefixForward + l.Key, Table: inet}
		in := &nftables.Chain{Name: prefixHostIn + l.Key, Table: inet}
		// The new rules go in front of the old ones, which they make
		// unreachable: each chain's rules end in a verdict for every
		// packet. Deleting rules costs the kernel an RCU grace period (10
		// ms and more on a busy host); the old ones go with the chains
		// when the sandbox's network is detached.
		rules := n.filterRules(fw, in, l, dns)
		for i := len(rules) - 1; i >= 0; i-- {
			if rules[i].Chain == fw && forward || rules[i].Chain == in && hostIn {
				c.InsertRule(rules[i])
			}
		}
	}
	if forward {
		if err := n.replaceEgressRedirect(c, old, l); err != nil {
			return nil, err
		}
	}
	if len(l.Ports) > len(old.Ports) {
		addPortRules(c, nat, l)
	}
	return c, c.err
}
