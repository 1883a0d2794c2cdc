// Package netns provides the network modes of sandboxes: none, host and
// bridge with NAT, published ports, an egress policy and a pool of prepared
// namespaces.
//
// Use:
//
//	nw, err := netns.Open(netns.Config{})            // changes nothing yet
//	a, err := nw.Attach(ctx, id, netns.AttachOptions{ // one per sandbox start
//		Mode:    netns.ModeBridge,
//		Publish: []netns.PortMapping{p}, // from netns.ParsePublish("8080:80")
//		Egress:  e,                      // from netns.ParseEgress("none")
//	})
//	// start the sandbox: join a.NetNSPath (bridge), a new empty namespace
//	// (none) or no network namespace (host); write a.ResolvConf and a.Hosts
//	// into its /etc.
//	err = nw.Detach(ctx, id)                          // on removal
//	removed, err := nw.GC(ctx, liveIDs)               // sbx gc, server start
//
// Every change on the host side goes through Config.HostNetNS, so tests run
// against a namespace of their own. State shared between sbx processes and
// roots (IP leases, the pool) lives in files of the bridge and its host
// namespace under Config.SharedDir, guarded by a lock file, each lease naming
// its root (Config.StateDir); rules live only in nftables tables named
// "sbx". See docs/network.md.
package netns
