package netns

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sbxrun/sbx/egress"
)

// Mode is a sandbox's network mode (the --network flag).
type Mode string

// The network modes.
const (
	// ModeNone gives the sandbox a namespace of its own with only loopback.
	ModeNone Mode = "none"
	// ModeHost shares the host's network namespace (no isolation at all).
	ModeHost Mode = "host"
	// ModeBridge gives the sandbox a veth on the bridge, an address, NAT and
	// the egress policy.
	ModeBridge Mode = "bridge"
)

// ParseMode parses the value of --network; the empty string means none.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeNone:
		return ModeNone, nil
	case ModeHost, ModeBridge:
		return Mode(s), nil
	}
	return "", fmt.Errorf("network mode %q is not known; use none, host or bridge", s)
}

// Proto is a transport protocol of a published or allowed port.
type Proto string

// The transport protocols.
const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

func parseProto(s string) (Proto, error) {
	switch Proto(strings.ToLower(s)) {
	case "", TCP:
		return TCP, nil
	case UDP:
		return UDP, nil
	}
	return "", fmt.Errorf("protocol %q is not supported; use tcp or udp", s)
}

// PortMapping publishes a port of the sandbox on the host (one -p/--publish).
type PortMapping struct {
	// HostIP limits the mapping to one host address; the zero value means
	// every address of the host, 127.0.0.1 included.
	HostIP netip.Addr `json:"host_ip,omitzero"`
	// HostPort is the port on the host; 0 asks Attach to pick a free one
	// (the Attachment then holds the chosen port).
	HostPort uint16 `json:"host_port"`
	// ContainerPort is the port inside the sandbox.
	ContainerPort uint16 `json:"container_port"`
	// Proto is tcp or udp.
	Proto Proto `json:"proto"`
}

// String gives the mapping in --publish syntax.
func (p PortMapping) String() string {
	s := fmt.Sprintf("%d:%d/%s", p.HostPort, p.ContainerPort, p.Proto)
	if p.HostIP.IsValid() {
		s = p.HostIP.String() + ":" + s
	}
	return s
}

// ParsePublish parses one --publish value, docker's syntax
// [IP:][HOSTPORT:]CTRPORT[/tcp|/udp]. HOSTPORT 0 or none means pick a free
// port.
func ParsePublish(s string) (PortMapping, error) {
	bad := func(why string) (PortMapping, error) {
		return PortMapping{}, fmt.Errorf("--publish %q: %s; use [IP:][HOSTPORT:]CTRPORT[/tcp|/udp]", s, why)
	}
	rest, protoStr, _ := strings.Cut(s, "/")
	proto, err := parseProto(protoStr)
	if err != nil {
		return bad(err.Error())
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		rest, i = "0:"+rest, 1 // CTRPORT alone: a free host port
	}
	ctrStr, front := rest[i+1:], rest[:i]
	hostStr, ipStr := front, ""
	if j := strings.LastIndex(front, ":"); j >= 0 {
		ipStr, hostStr = front[:j], front[j+1:]
	}
	var m PortMapping
	m.Proto = proto
	if ipStr != "" {
		ip, err := netip.ParseAddr(strings.Trim(ipStr, "[]"))
		if err != nil {
			return bad("host IP is not an address")
		}
		if !ip.Is4() {
			return bad("only IPv4 host addresses are supported")
		}
		if !ip.IsUnspecified() {
			m.HostIP = ip
		}
	}
	if hostStr == "" {
		hostStr = "0" // IP::CTRPORT
	}
	hp, err := strconv.ParseUint(hostStr, 10, 16)
	if err != nil {
		return bad("host port must be a number 0-65535")
	}
	cp, err := strconv.ParseUint(ctrStr, 10, 16)
	if err != nil || cp == 0 {
		return bad("container port must be a number 1-65535")
	}
	m.HostPort, m.ContainerPort = uint16(hp), uint16(cp)
	return m, nil
}

// HostPort is one host service opened to a sandbox (--allow-host-port).
type HostPort struct {
	Port  uint16 `json:"port"`
	Proto Proto  `json:"proto"`
}

// ParseHostPort parses one --allow-host-port value, PORT[/tcp|/udp].
func ParseHostPort(s string) (HostPort, error) {
	portStr, protoStr, _ := strings.Cut(s, "/")
	proto, err := parseProto(protoStr)
	if err != nil {
		return HostPort{}, fmt.Errorf("--allow-host-port %q: %w", s, err)
	}
	p, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || p == 0 {
		return HostPort{}, fmt.Errorf("--allow-host-port %q: port must be a number 1-65535; use PORT[/tcp|/udp]", s)
	}
	return HostPort{Port: uint16(p), Proto: proto}, nil
}

// EgressKind says what a bridged sandbox may reach.
type EgressKind string

// The egress kinds.
const (
	// EgressDefault allows the internet but not the host, other sandboxes,
	// link-local addresses or private ranges.
	EgressDefault EgressKind = "default"
	// EgressAllowList allows only the listed prefixes.
	EgressAllowList EgressKind = "allow"
	// EgressNone blocks all egress.
	EgressNone EgressKind = "none"
)

// EgressPolicy is a bridged sandbox's egress policy (the --egress flag).
// The zero value is EgressDefault.
type EgressPolicy struct {
	Kind EgressKind `json:"kind,omitempty"`
	// Allow are the allowed CIDRs (EgressAllowList).
	Allow []netip.Prefix `json:"allow,omitempty"`
	// Names is the whole policy when it has more than CIDRs: host
	// names, deny entries, L7 rules or secret bindings. With names, the
	// sandbox's TCP 80, 443 (and named ports) and DNS go to the egress
	// daemon; Kind is then EgressDefault for "*" and EgressAllowList
	// otherwise (Allow may be empty).
	Names *egress.Policy `json:"names,omitempty"`
}

// ParseEgress parses --egress: "" or "default", "none", or a list of
// entries (egress.Parse): CIDRs and addresses, host names with optional
// :port, "*", and "!" before any of them to deny.
func ParseEgress(s string) (EgressPolicy, error) {
	switch strings.TrimSpace(s) {
	case "", string(EgressDefault):
		return EgressPolicy{Kind: EgressDefault}, nil
	case string(EgressNone):
		return EgressPolicy{Kind: EgressNone}, nil
	}
	p, err := egress.Parse(s)
	if err != nil {
		return EgressPolicy{}, fmt.Errorf("%w; use none, default or entries CIDR, HOST[:PORT], *.DOMAIN, **.DOMAIN, !ENTRY", err)
	}
	return fromPolicy(p), nil
}

func (p EgressPolicy) kind() EgressKind {
	if p.Kind == "" {
		return EgressDefault
	}
	return p.Kind
}

// blockedByDefault are the destinations the default egress policy drops
// (egress.BlockedPrefixes).
var blockedByDefault = egress.BlockedPrefixes

// PrivateAddr reports whether a is a destination the default egress policy
// drops (private, shared, loopback, link-local, multicast, reserved or
// unspecified; egress.PrivateAddr). A name server at such an address is
// still reachable on port 53 (--dns opens it), so front-ends that serve
// untrusted callers should treat such --dns values like host networking.
func PrivateAddr(a netip.Addr) bool { return egress.PrivateAddr(a) }

// AttachOptions are the per-sandbox network settings; they map 1:1 onto the
// flags --network, -p/--publish, --egress, --allow-host-port, --dns and
// --hostname.
type AttachOptions struct {
	Mode           Mode
	Publish        []PortMapping
	Egress         EgressPolicy
	AllowHostPorts []HostPort
	// DNS replaces the host's name servers in the sandbox's resolv.conf.
	DNS []netip.Addr
	// Hostname goes into the sandbox's /etc/hosts; empty means "sandbox".
	Hostname string
	// Standby, for a warm pool's member (which publishes no ports), starts
	// the holder of the ports a claim may publish with the member, so
	// that Reconfigure hands it their sockets instead of starting one, and
	// makes the empty file its lease's next write fills (lease.go).
	Standby bool
}

func (o AttachOptions) validate() error {
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return err
	}
	if o.Mode != ModeBridge {
		switch {
		case len(o.Publish) > 0:
			return fmt.Errorf("--publish needs --network bridge (mode is %s)", o.modeName())
		case o.Egress.kind() != EgressDefault:
			return fmt.Errorf("--egress needs --network bridge (mode is %s)", o.modeName())
		case len(o.AllowHostPorts) > 0:
			return fmt.Errorf("--allow-host-port needs --network bridge (mode is %s)", o.modeName())
		}
	}
	for _, p := range o.Publish {
		if p.ContainerPort == 0 {
			return fmt.Errorf("published port %s: container port 0 is not valid", p)
		}
		if p.Proto != TCP && p.Proto != UDP {
			return fmt.Errorf("published port %s: protocol must be tcp or udp", p)
		}
		if p.HostIP.IsValid() && !p.HostIP.Is4() {
			return fmt.Errorf("published port %s: only IPv4 host addresses are supported", p)
		}
	}
	for i, a := range o.Publish {
		for _, b := range o.Publish[i+1:] {
			if a.HostPort != 0 && portsClash(a, b) {
				return fmt.Errorf("published ports %s and %s use the same host port", a, b)
			}
		}
	}
	for _, h := range o.AllowHostPorts {
		if h.Port == 0 || (h.Proto != TCP && h.Proto != UDP) {
			return fmt.Errorf("--allow-host-port %d/%s is not valid; use PORT[/tcp|/udp]", h.Port, h.Proto)
		}
	}
	switch o.Egress.kind() {
	case EgressDefault, EgressNone:
	case EgressAllowList:
		if len(o.Egress.Allow) == 0 && !o.Egress.proxied() {
			return fmt.Errorf("--egress allow-list is empty; use none to block all egress")
		}
		for _, p := range o.Egress.Allow {
			if !p.IsValid() || !p.Addr().Is4() {
				return fmt.Errorf("--egress %s is not an IPv4 CIDR", p)
			}
		}
	default:
		return fmt.Errorf("egress policy %q is not known", o.Egress.Kind)
	}
	if o.Egress.Names != nil {
		if o.Egress.kind() == EgressNone {
			return fmt.Errorf("--egress none takes no other entries")
		}
		if err := o.Egress.Names.Validate(); err != nil {
			return fmt.Errorf("--egress: %w", err)
		}
	}
	for _, d := range o.DNS {
		if !d.Is4() {
			return fmt.Errorf("--dns %s: only IPv4 name servers are supported", d)
		}
	}
	if o.Hostname != "" && !validHostname(o.Hostname) {
		return fmt.Errorf("hostname %q is not valid; use letters, digits, '-' and '.' (at most 253)", o.Hostname)
	}
	return nil
}

func (o AttachOptions) modeName() string {
	if o.Mode == "" {
		return string(ModeNone)
	}
	return string(o.Mode)
}

// portsClash reports whether two mappings want the same host port.
func portsClash(a, b PortMapping) bool {
	if a.Proto != b.Proto || a.HostPort != b.HostPort {
		return false
	}
	return !a.HostIP.IsValid() || !b.HostIP.IsValid() || a.HostIP == b.HostIP
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Flags are the raw values of the network flags of `sbx run`, `sbx create`
// and the REST API, one field per flag.
type Flags struct {
	Network        string   // --network
	Publish        []string // -p/--publish, repeatable
	Egress         string   // --egress
	AllowHostPorts []string // --allow-host-port, repeatable
	DNS            []string // --dns, repeatable
	Hostname       string   // --hostname
}

// ParseFlags turns the network flags into AttachOptions, with an error
// naming the flag at fault.
func ParseFlags(f Flags) (AttachOptions, error) {
	var o AttachOptions
	var err error
	if o.Mode, err = ParseMode(f.Network); err != nil {
		return AttachOptions{}, fmt.Errorf("--network: %w", err)
	}
	for _, s := range f.Publish {
		p, err := ParsePublish(s)
		if err != nil {
			return AttachOptions{}, err
		}
		o.Publish = append(o.Publish, p)
	}
	if o.Egress, err = ParseEgress(f.Egress); err != nil {
		return AttachOptions{}, err
	}
	for _, s := range f.AllowHostPorts {
		h, err := ParseHostPort(s)
		if err != nil {
			return AttachOptions{}, err
		}
		o.AllowHostPorts = append(o.AllowHostPorts, h)
	}
	for _, s := range f.DNS {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || !a.Is4() {
			return AttachOptions{}, fmt.Errorf("--dns %q is not an IPv4 address", s)
		}
		o.DNS = append(o.DNS, a)
	}
	o.Hostname = f.Hostname
	if err := o.validate(); err != nil {
		return AttachOptions{}, err
	}
	return o, nil
}
