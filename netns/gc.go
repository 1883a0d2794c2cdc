package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Prepare prepares up to count namespaces (veth, address, anti-spoofing
// guard) ahead of time, so a bridged Attach only installs the sandbox's
// rules. The pool lives on disk and in the kernel, so any sbx process can
// use what another one prepared. It returns how many it added.
func (n *Network) Prepare(ctx context.Context, count int) (int, error) {
	added := 0
	for added < count {
		if err := ctx.Err(); err != nil {
			return added, err
		}
		lk, err := n.lock()
		if err != nil {
			return added, err
		}
		err = n.ensureBridge()
		if err == nil {
			_, err = n.prepare("")
		}
		lk.unlock()
		if err != nil {
			return added, fmt.Errorf("prefill network pool: %w", err)
		}
		added++
	}
	return added, nil
}

// SweepInterrupted removes the leases (with their namespaces, veths and
// rules) of prepares and attaches that died midway, such as a create
// killed while its network was being set up. sbx gc and a starting server
// call it; Attach, DiscardPrepared and Reset do it too. It returns a line per
// removed lease.
func (n *Network) SweepInterrupted(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lk, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	ls, err := n.readLeases()
	if err != nil {
		return nil, err
	}
	kept := map[*lease]bool{}
	for _, l := range n.sweepDebris(ls) {
		kept[l] = true
	}
	var removed []string
	for _, l := range ls {
		if !kept[l] {
			removed = append(removed, fmt.Sprintf("network lease %s (%s %s)", l.IP, l.State, l.Owner))
		}
	}
	return removed, nil
}

// Prepared returns how many prepared namespaces wait in the pool.
func (n *Network) Prepared() (int, error) {
	lk, err := n.lock()
	if err != nil {
		return 0, err
	}
	defer lk.unlock()
	ls, err := n.readLeases()
	if err != nil {
		return 0, err
	}
	count := 0
	for _, l := range ls {
		if n.mine(l) && l.State == statePrepared {
			count++
		}
	}
	return count, nil
}

// DiscardPrepared removes every prepared namespace from the pool, and what
// interrupted operations left.
func (n *Network) DiscardPrepared(ctx context.Context) error {
	lk, err := n.lock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	ls, err := n.readLeases()
	if err != nil {
		return err
	}
	ls = n.sweepDebris(ls)
	var errs []error
	for _, l := range ls {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n.mine(l) && l.State == statePrepared {
			errs = append(errs, n.teardown(l))
		}
	}
	return errors.Join(errs...)
}

// GC removes the network leftovers of this root's sandboxes that are not
// in live (keyed by sandbox ID) and of crashed operations: leases, veths on
// the bridge, namespace mounts in RunDir and per-sandbox chains, map
// elements and rules in the sbx tables. Healthy pooled namespaces stay, and
// so does everything other roots sharing the bridge hold, unless such a
// root was deleted. It returns a line per removed item.
func (n *Network) GC(ctx context.Context, live map[string]bool) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lk, err := n.lock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	var removed []string
	var errs []error

	br, brErr := n.host.LinkByName(n.cfg.BridgeName)
	if brErr == nil {
		if err := n.ensureBridge(); err != nil {
			return nil, err
		}
	}

	leases, err := n.readLeases()
	if err != nil {
		return nil, err
	}
	keepKeys, keepVeths, keepNS, keepHolders := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[int]bool{}
	for _, l := range leases {
		keep := false
		switch {
		case l.Root != "" && !n.mine(l):
			keep = !rootGone(l) // its root's GC judges it
		case l.State == stateAttached:
			keep = live[l.Owner]
		case l.State == statePrepared:
			keep = n.preparedUsable(l)
		}
		if keep {
			keepKeys[l.Key], keepVeths[l.HostVeth], keepNS[filepath.Clean(l.NetNSPath)] = true, true, true
			if l.Holder != nil {
				keepHolders[l.Holder.PID] = true
			}
			continue
		}
		what := fmt.Sprintf("lease %s (%s %s)", l.IP, l.State, l.Owner)
		if err := n.teardown(l); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		} else {
			removed = append(removed, what)
		}
	}

	// Veths on the bridge that no lease explains.
	if brErr == nil {
		links, err := n.host.LinkList()
		if err != nil {
			errs = append(errs, fmt.Errorf("list links: %w", err))
		}
		for _, link := range links {
			a := link.Attrs()
			if a.MasterIndex != br.Attrs().Index || link.Type() != "veth" || !strings.HasPrefix(a.Name, "sbx") || keepVeths[a.Name] {
				continue
			}
			if gone, err := n.deleteLink(link); err != nil {
				errs = append(errs, fmt.Errorf("delete veth %s: %w", a.Name, err))
			} else if !gone {
				removed = append(removed, "veth "+a.Name)
			}
		}
	}

	// Namespace mounts that no lease explains.
	ents, err := os.ReadDir(n.cfg.RunDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("read %s: %w", n.cfg.RunDir, err))
	}
	for _, e := range ents {
		p := filepath.Join(n.cfg.RunDir, e.Name())
		if keepNS[p] {
			continue
		}
		if err := RemoveNamespace(p); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, "namespace "+p)
		}
	}

	// Holders of published ports that no lease explains (a lease file
	// removed by hand).
	removed = append(removed, n.sweepHolders(keepHolders)...)
	// Standby holders' sockets of no kept lease (their holder is gone
	// with the lease).
	socks, _ := os.ReadDir(filepath.Join(n.cfg.StateDir, standbyDir))
	for _, e := range socks {
		if key, ok := strings.CutSuffix(e.Name(), ".sock"); ok && !keepKeys[key] {
			if err := os.Remove(filepath.Join(n.cfg.StateDir, standbyDir, e.Name())); err == nil {
				removed = append(removed, "standby holder socket "+e.Name())
			}
		}
	}

	// Rules that no lease explains.
	r, err := n.gcRules(keepKeys, leases)
	removed = append(removed, r...)
	if err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// deleteLink deletes a link of the host namespace. A link that vanished
// before the call is not an error (gone reports it): a veth goes with its
// peer's namespace, which the kernel destroys asynchronously, so a listed
// veth can disappear before its delete; deleting it is idempotent.
func (n *Network) deleteLink(link netlink.Link) (gone bool, err error) {
	err = n.host.LinkDel(link)
	if errors.Is(err, unix.ENODEV) {
		return true, nil
	}
	return false, err
}

func (n *Network) gcRules(keepKeys map[string]bool, leases []*lease) ([]string, error) {
	c, err := n.nft()
	if err != nil {
		return nil, err
	}
	if _, err := c.ListTableOfFamily(n.tableName(), nftables.TableFamilyINet); err != nil {
		return nil, nil // no sbx tables: nothing to collect
	}
	// A map element stays only if it leads to the chain of the kept lease
	// it is keyed by: an address may have been leased again since.
	keptIP, keptVeth := map[string]string{}, map[string]string{}
	for _, l := range leases {
		if keepKeys[l.Key] {
			a := l.IP.As4()
			if l.State == stateAttached {
				keptIP[string(a[:])] = l.Key
			}
			keptVeth[string(ifnameBytes(l.HostVeth))] = l.Key
		}
	}
	inet, nat, br := n.tables()
	var removed []string
	for _, m := range []struct {
		set  *nftables.Set
		kept map[string]string
	}{{fwdMap(inet), keptIP}, {hostInMap(inet), keptIP}, {portsMap(br), keptVeth}} {
		els, err := c.GetSetElements(m.set)
		if err != nil {
			continue
		}
		var del []nftables.SetElement
		for _, e := range els {
			key, ok := m.kept[string(e.Key)]
			// The library returns a verdict element's data as raw netlink
			// attributes; the chain name is in them, NUL-terminated.
			if !ok || !strings.Contains(string(e.Val), "-"+key+"\x00") {
				del = append(del, nftables.SetElement{Key: e.Key})
			}
		}
		if len(del) > 0 {
			if err := c.SetDeleteElements(m.set, del); err != nil {
				return removed, err
			}
			removed = append(removed, fmt.Sprintf("%d elements of map %s", len(del), m.set.Name))
		}
	}
	rules, _ := c.GetRules(nat, &nftables.Chain{Name: "published", Table: nat})
	for _, r := range rules {
		if len(r.UserData) > 0 && !keepKeys[string(r.UserData)] {
			if err := c.DelRule(r); err != nil {
				return removed, err
			}
			removed = append(removed, "published-port jump of "+string(r.UserData))
		}
	}
	chains, err := c.ListChains()
	if err != nil {
		return removed, fmt.Errorf("list nftables chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name != n.tableName() || ch.Hooknum != nil {
			continue
		}
		for _, p := range []string{prefixForward, prefixHostIn, prefixPorts, prefixSpoof} {
			if key, ok := strings.CutPrefix(ch.Name, p); ok && !keepKeys[key] {
				c.FlushChain(ch)
				c.DelChain(ch)
				removed = append(removed, "chain "+ch.Name)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return removed, fmt.Errorf("remove stale nftables rules: %w", err)
	}
	return removed, nil
}

// Reset removes the bridge, the sbx tables and the pool when no sandbox is
// attached any more (for uninstalling or changing the subnet).
func (n *Network) Reset(ctx context.Context) error {
	if err := n.DiscardPrepared(ctx); err != nil {
		return err
	}
	lk, err := n.lock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	ls, err := n.readLeases()
	if err != nil {
		return err
	}
	if ls = n.sweepDebris(ls); len(ls) > 0 {
		var owners []string
		for _, l := range ls {
			switch {
			case !n.mine(l):
				owners = append(owners, fmt.Sprintf("%s of the root at %s", l.Owner, filepath.Dir(l.Root)))
			case l.Owner == "":
				owners = append(owners, "a pooled namespace")
			default:
				owners = append(owners, l.Owner)
			}
		}
		return fmt.Errorf("%d sandboxes still hold network leases on bridge %s (%s); remove them (or run sbx gc in their root) first", len(ls), n.cfg.BridgeName, strings.Join(owners, ", "))
	}
	c, err := n.nft()
	if err != nil {
		return err
	}
	inet, nat, br := n.tables()
	for _, t := range []*nftables.Table{inet, nat, br} {
		if _, err := c.ListTableOfFamily(n.tableName(), t.Family); err == nil {
			c.DelTable(t)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete sbx nftables tables: %w", err)
	}
	if link, err := n.host.LinkByName(n.cfg.BridgeName); err == nil {
		if _, err := n.deleteLink(link); err != nil {
			return fmt.Errorf("delete bridge %s: %w", n.cfg.BridgeName, err)
		}
	} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
		return fmt.Errorf("look up bridge %s: %w", n.cfg.BridgeName, err)
	}
	n.mu.Lock()
	n.ready = false
	n.mu.Unlock()
	return nil
}
