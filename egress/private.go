package egress

import "net/netip"

// BlockedPrefixes are the IPv4 destinations sandboxes never reach by
// default and never reach through a name: "this" network, private ranges,
// shared address space, loopback, link-local (the cloud metadata address
// among them), benchmarking, multicast and reserved.
var BlockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// PrivateAddr reports whether a is a destination sandboxes never reach by
// default (BlockedPrefixes; for IPv6 anything but global unicast, and
// unique local addresses). IPv4-mapped addresses are judged as IPv4.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.Is4() {
		return !a.IsGlobalUnicast() || a.IsPrivate()
	}
	for _, p := range BlockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
