package netns

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Defaults of Config.
const (
	DefaultBridgeName = "sbx0"
	DefaultStateDir   = "/var/lib/sbx/network"
	DefaultRunDir     = "/run/sbx/netns"
	DefaultResolvConf = "/etc/resolv.conf"
)

// DefaultSubnet is the bridge subnet used unless it collides with a route the
// host already has; then 10.89.0.0/16, 10.90.0.0/16 ... are tried.
var DefaultSubnet = netip.MustParsePrefix("10.88.0.0/16")

// Config says where the network state lives and which namespace is the host.
type Config struct {
	// BridgeName is the Linux bridge sandboxes attach to (default sbx0).
	BridgeName string
	// Subnet of the bridge; the zero value picks DefaultSubnet or the next
	// /16 that collides with no route. An existing bridge keeps its subnet.
	Subnet netip.Prefix
	// StateDir is this root's network state (default /var/lib/sbx/network):
	// the port holder binary, and the lease of every sandbox of this root
	// names it. The leases themselves and the lock are shared by every root
	// that uses the bridge: see SharedDir.
	StateDir string
	// SharedDir holds, for each bridge and host namespace, the lock and the
	// leases shared by every sbx root that attaches sandboxes to that bridge
	// (SharedDir/BRIDGE-NSID, see SharedStateDir; default /run/sbx/bridges).
	SharedDir string
	// RunDir holds the bind mounts that keep sandbox namespaces alive
	// (default /run/sbx/netns).
	RunDir string
	// HostNetNS is the path of the namespace that plays the host: bridge,
	// veths, rules and sysctls all go there. Empty means the namespace of the
	// thread calling Open. Tests pass a namespace of their own.
	HostNetNS string
	// HostResolvConf is read for name servers when AttachOptions.DNS is
	// empty (default /etc/resolv.conf).
	HostResolvConf string
	// PortHolder is the sbx-hold binary that keeps published ports bound
	// (empty: the embedded one, written under StateDir/helpers).
	PortHolder string
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// Network manages the network side of sandboxes: modes, bridge, leases,
// rules, published ports and the pool. Several processes may use the same
// StateDir at once; they coordinate through a lock file.
type Network struct {
	cfg    Config
	shared string // SharedStateDir of the bridge
	hostNS *os.File
	host   *netlink.Handle
	log    *slog.Logger

	mu      sync.Mutex
	ready   bool // bridge and base rules checked by this process
	subnet  netip.Prefix
	gateway netip.Addr

	// nfnl is the netlink socket claims send their rules on (batch.go),
	// while no batch uses it.
	nfnl chan *nfnlSocket
	// stock holds sockets made ahead in the host namespace (sockstock.go).
	stock socketStock
}

// Open prepares a Network. It changes nothing on the host: the bridge and
// rules are made on the first bridged Attach or Prepare.
func Open(cfg Config) (*Network, error) {
	if cfg.BridgeName == "" {
		cfg.BridgeName = DefaultBridgeName
	}
	if len(cfg.BridgeName) > 15 {
		return nil, fmt.Errorf("bridge name %q is longer than 15 characters", cfg.BridgeName)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.SharedDir == "" {
		cfg.SharedDir = DefaultSharedDir
	}
	// The state directory names this root in shared leases: one spelling.
	for _, d := range []*string{&cfg.StateDir, &cfg.SharedDir, &cfg.RunDir} {
		abs, err := filepath.Abs(*d)
		if err != nil {
			return nil, fmt.Errorf("network state directory %s: %w", *d, err)
		}
		*d = abs
	}
	if cfg.RunDir == "" {
		cfg.RunDir = DefaultRunDir
	}
	if cfg.HostResolvConf == "" {
		cfg.HostResolvConf = DefaultResolvConf
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Subnet.IsValid() {
		if !cfg.Subnet.Addr().Is4() || cfg.Subnet.Bits() > 28 || cfg.Subnet.Bits() < 8 {
			return nil, fmt.Errorf("subnet %s: need an IPv4 prefix between /8 and /28", cfg.Subnet)
		}
		cfg.Subnet = cfg.Subnet.Masked()
	}
	for _, d := range []string{cfg.StateDir, cfg.RunDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create network state directory: %w", err)
		}
	}
	nsPath := cfg.HostNetNS
	if nsPath == "" {
		nsPath = "/proc/thread-self/ns/net"
	}
	f, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open host network namespace %s: %w", nsPath, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		f.Close()
		return nil, fmt.Errorf("host network namespace %s is not a namespace file", nsPath)
	}
	id, err := namespaceID(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, err
	}
	h, err := netlink.NewHandleAt(vnetns.NsHandle(int(f.Fd())))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netlink handle in host namespace: %w", err)
	}
	shared := sharedPath(cfg.SharedDir, cfg.BridgeName, id)
	return &Network{cfg: cfg, shared: shared, hostNS: f, host: h, log: cfg.Logger, nfnl: make(chan *nfnlSocket, 1)}, nil
}

// Close releases the host namespace handle. Sandboxes stay attached.
func (n *Network) Close() error {
	select {
	case s := <-n.nfnl:
		s.close()
	default:
	}
	n.closeStock()
	n.host.Close()
	return n.hostNS.Close()
}

// Subnet returns the bridge subnet and the gateway address, once known.
func (n *Network) Subnet() (netip.Prefix, netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.subnet, n.gateway
}

func (n *Network) hostFD() int { return int(n.hostNS.Fd()) }

// ensureBridge makes (or adopts) the bridge and the base rules. Call with the
// state lock held.
func (n *Network) ensureBridge() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ready {
		return nil
	}
	br, err := n.host.LinkByName(n.cfg.BridgeName)
	var notFound netlink.LinkNotFoundError
	fresh := false
	switch {
	case errors.As(err, &notFound):
		if err := n.createBridge(); err != nil {
			return err
		}
		fresh = true
	case err != nil:
		return fmt.Errorf("look up bridge %s: %w", n.cfg.BridgeName, err)
	default:
		if err := n.adoptBridge(br); err != nil {
			return err
		}
	}
	// A new bridge may have a new subnet: rules of an old one are rebuilt.
	if err := n.ensureRules(fresh); err != nil {
		return err
	}
	n.ready = true
	return nil
}

// readBridge learns the subnet and gateway of an existing bridge without
// changing anything.
func (n *Network) readBridge() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subnet.IsValid() {
		return nil
	}
	br, err := n.host.LinkByName(n.cfg.BridgeName)
	if err != nil {
		return fmt.Errorf("bridge %s is missing (run sbx gc): %w", n.cfg.BridgeName, err)
	}
	addrs, err := n.host.AddrList(br, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("bridge %s has no IPv4 address", n.cfg.BridgeName)
	}
	gw, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	ones, _ := addrs[0].Mask.Size()
	n.subnet, n.gateway = netip.PrefixFrom(gw, ones).Masked(), gw
	return nil
}

func (n *Network) adoptBridge(br netlink.Link) error {
	if br.Type() != "bridge" {
		return fmt.Errorf("%s exists but is a %s, not a bridge; set another bridge name", n.cfg.BridgeName, br.Type())
	}
	addrs, err := n.host.AddrList(br, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("addresses of bridge %s: %w", n.cfg.BridgeName, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("bridge %s has no IPv4 address; delete it (ip link del %s) and retry", n.cfg.BridgeName, n.cfg.BridgeName)
	}
	gw, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	ones, _ := addrs[0].Mask.Size()
	sub := netip.PrefixFrom(gw, ones).Masked()
	if n.cfg.Subnet.IsValid() && n.cfg.Subnet != sub {
		return fmt.Errorf("bridge %s already uses subnet %s, not the configured %s; remove all bridged sandboxes and the bridge to change it", n.cfg.BridgeName, sub, n.cfg.Subnet)
	}
	n.subnet, n.gateway = sub, gw
	if err := n.pinBridgeMAC(br, br.Attrs().HardwareAddr); err != nil {
		return err
	}
	if br.Attrs().OperState != netlink.OperUp && br.Attrs().Flags&net.FlagUp == 0 {
		if err := n.host.LinkSetUp(br); err != nil {
			return fmt.Errorf("set bridge %s up: %w", n.cfg.BridgeName, err)
		}
	}
	return n.hostSysctls()
}

// pickSubnet returns the configured subnet, or the first candidate /16 that
// overlaps no route of the host.
func (n *Network) pickSubnet() (netip.Prefix, error) {
	routes, err := n.host.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list host routes: %w", err)
	}
	collides := func(p netip.Prefix) string {
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			ones, _ := r.Dst.Mask.Size()
			if ones == 0 {
				continue
			}
			a, ok := netip.AddrFromSlice(r.Dst.IP.To4())
			if !ok {
				continue
			}
			if rp := netip.PrefixFrom(a, ones); rp.Overlaps(p) {
				return rp.String()
			}
		}
		return ""
	}
	if n.cfg.Subnet.IsValid() {
		if c := collides(n.cfg.Subnet); c != "" {
			return netip.Prefix{}, fmt.Errorf("subnet %s collides with the host route to %s; choose another subnet", n.cfg.Subnet, c)
		}
		return n.cfg.Subnet, nil
	}
	for i := 0; i < 12; i++ {
		a := DefaultSubnet.Addr().As4()
		a[1] += byte(i)
		p := netip.PrefixFrom(netip.AddrFrom4(a), DefaultSubnet.Bits())
		if collides(p) == "" {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("10.88.0.0/16 to 10.99.0.0/16 all collide with host routes; configure a subnet")
}

func (n *Network) createBridge() error {
	sub, err := n.pickSubnet()
	if err != nil {
		return err
	}
	gw := sub.Addr().Next()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: n.cfg.BridgeName}}
	if err := n.host.LinkAdd(br); err != nil {
		return fmt.Errorf("create bridge %s: %w", n.cfg.BridgeName, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = n.host.LinkDel(br)
		}
	}()
	mac := make(net.HardwareAddr, 6)
	_, _ = rand.Read(mac)
	mac[0] = mac[0]&^1 | 2 // unicast, locally administered
	if err := n.pinBridgeMAC(br, mac); err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(sub.Bits(), 32)}}
	if err := n.host.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("address %s on bridge %s: %w", gw, n.cfg.BridgeName, err)
	}
	if err := n.host.LinkSetUp(br); err != nil {
		return fmt.Errorf("set bridge %s up: %w", n.cfg.BridgeName, err)
	}
	n.subnet, n.gateway = sub, gw
	if err := n.hostSysctls(); err != nil {
		return err
	}
	ok = true
	n.log.Info("created bridge", "bridge", n.cfg.BridgeName, "subnet", sub)
	return nil
}

// pinBridgeMAC sets the bridge's MAC address. A bridge whose address was
// never set takes the lowest address of its ports, so it changed whenever
// a sandbox's veth came or went, and every other sandbox, holding the old
// gateway address in its ARP cache, lost its traffic until the entry
// expired. An address set once stays.
func (n *Network) pinBridgeMAC(br netlink.Link, mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("bridge %s has no Ethernet address", n.cfg.BridgeName)
	}
	if err := n.host.LinkSetHardwareAddr(br, mac); err != nil {
		return fmt.Errorf("set the address of bridge %s: %w", n.cfg.BridgeName, err)
	}
	return nil
}

// hostSysctls enables forwarding, lets 127.0.0.1 DNAT leave through the
// bridge (route_localnet; the input rules drop loopback destinations coming
// from sandboxes) and turns IPv6 off on the bridge.
func (n *Network) hostSysctls() error {
	br := n.cfg.BridgeName
	return InNamespace(n.hostFD(), func() error {
		if cur, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(cur)) != "1" {
			if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
				return err
			}
			n.log.Info("enabled IPv4 forwarding (net.ipv4.ip_forward=1) for bridged sandboxes")
		}
		if err := writeSysctl("net/ipv4/conf/"+br+"/route_localnet", "1"); err != nil {
			return err
		}
		if err := writeSysctl("net/ipv6/conf/"+br+"/disable_ipv6", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}
