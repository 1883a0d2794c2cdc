package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/netns"
)

// parseNetwork turns the network options of o into netns's form, with an
// error naming the option at fault.
func parseNetwork(o *sbx.Options, hostname string) (netns.AttachOptions, error) {
	a, err := netns.ParseFlags(netns.Flags{Network: o.Network, Publish: o.Publish, Egress: o.Egress,
		AllowHostPorts: o.AllowHostPorts, DNS: o.DNS, Hostname: hostname})
	if err != nil {
		return a, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	if o.EgressPolicy != "" {
		p, err := egress.ParseFile([]byte(o.EgressPolicy))
		if err == nil {
			a.Egress, err = netns.PolicyEgress(p)
		}
		if err != nil {
			return a, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
		}
	}
	if err := addSecretBindings(&a, o.Secrets); err != nil {
		return a, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	return a, nil
}

// networkInfo is the contract's form of an attachment.
func networkInfo(a *netns.Attachment) *sbx.NetworkInfo {
	if a == nil {
		return nil
	}
	n := &sbx.NetworkInfo{SandboxID: a.SandboxID, Mode: string(a.Mode), NetNSPath: a.NetNSPath, IP: a.IP,
		Gateway: a.Gateway, Subnet: a.Subnet, HostVeth: a.HostVeth, DNS: a.DNS, FromPool: a.FromPool,
		Egress: sbx.Egress{Kind: string(a.Egress.Kind), Allow: a.Egress.Allow}}
	for _, p := range a.Ports {
		n.Ports = append(n.Ports, sbx.PortMapping{HostIP: p.HostIP, HostPort: p.HostPort, ContainerPort: p.ContainerPort, Proto: string(p.Proto)})
	}
	for _, p := range a.AllowHostPorts {
		n.AllowHostPorts = append(n.AllowHostPorts, sbx.HostPort{Port: p.Port, Proto: string(p.Proto)})
	}
	return n
}

// PreparedNetworks returns how many prepared bridged namespaces wait in the pool.
func (h *Host) PreparedNetworks() (int, error) {
	n, err := h.network()
	if err != nil {
		return 0, err
	}
	return n.Prepared()
}

// PrepareNetworks prepares namespaces until want wait in the pool; it returns
// how many it added and how many wait now.
func (h *Host) PrepareNetworks(ctx context.Context, want int) (added, have int, err error) {
	n, err := h.network()
	if err != nil {
		return 0, 0, err
	}
	if have, err = n.Prepared(); err != nil || want <= have {
		return 0, have, err
	}
	added, err = n.Prepare(ctx, want-have)
	return added, have + added, err
}

// DiscardPreparedNetworks removes every prepared namespace from the pool.
func (h *Host) DiscardPreparedNetworks(ctx context.Context) error {
	n, err := h.network()
	if err != nil {
		return err
	}
	return n.DiscardPrepared(ctx)
}

// ResetNetwork drains the pool and deletes the bridge and sbx's nftables
// tables; it refuses while a bridged sandbox exists.
func (h *Host) ResetNetwork(ctx context.Context) error {
	n, err := h.network()
	if err != nil {
		return err
	}
	return n.Reset(ctx)
}
