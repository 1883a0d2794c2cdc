package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// DefaultPorts are the ports a host entry without :port allows.
var DefaultPorts = []uint16{443, 80}

// Rule is one allow or deny entry: a CIDR, or a host pattern with an
// optional port.
type Rule struct {
	// CIDR is set for an address entry (IPv4).
	CIDR netip.Prefix `json:"cidr,omitzero" yaml:"-"`
	// Host is set for a name entry: "api.example.com", "*.example.com"
	// (one more label) or "**.example.com" (any depth, never the apex);
	// lower case, no trailing dot.
	Host string `json:"host,omitempty" yaml:"-"`
	// Port limits a host entry to one port; 0 means DefaultPorts.
	// Address entries cover every port.
	Port uint16 `json:"port,omitempty" yaml:"-"`
}

// String gives the entry in --egress syntax.
func (r Rule) String() string {
	if r.CIDR.IsValid() {
		if r.CIDR.Bits() == 32 {
			return r.CIDR.Addr().String()
		}
		return r.CIDR.String()
	}
	if r.Port != 0 {
		return r.Host + ":" + strconv.Itoa(int(r.Port))
	}
	return r.Host
}

// IsName reports whether r is a host entry.
func (r Rule) IsName() bool { return r.Host != "" }

// MatchName reports whether host entry r covers name (normalised, see
// NormalizeName) on port.
func (r Rule) MatchName(name string, port uint16) bool {
	if r.Host == "" || !r.portOK(port) {
		return false
	}
	return MatchHost(r.Host, name)
}

func (r Rule) portOK(port uint16) bool {
	if r.Port != 0 {
		return port == r.Port
	}
	return slices.Contains(DefaultPorts, port)
}

// MatchHost reports whether the host pattern covers name (both normalised):
// an exact name, "*.d" for one label before d, "**.d" for one or more.
func MatchHost(pattern, name string) bool {
	switch {
	case strings.HasPrefix(pattern, "**."):
		base := pattern[2:] // ".d"
		return len(name) > len(base) && strings.HasSuffix(name, base)
	case strings.HasPrefix(pattern, "*."):
		base := pattern[1:]
		if len(name) <= len(base) || !strings.HasSuffix(name, base) {
			return false
		}
		return !strings.Contains(name[:len(name)-len(base)], ".")
	}
	return pattern == name
}

// HostPolicy is what a policy says about one host pattern beyond allowing
// it: its L7 rules. A host with rules (or with secret bindings, see
// Policy.Inspected) is inspected: its TLS is terminated by an Inspector.
type HostPolicy struct {
	// Host is the pattern as in Rule.Host.
	Host string `json:"host"`
	// Rules are the requests allowed on the host; an unmatched request
	// is refused unless Audit is set.
	Rules []L7Rule `json:"rules,omitempty"`
	// Audit lets requests no rule matches through, audited ("audit"
	// mode); the default is to refuse them ("enforce").
	Audit bool `json:"audit,omitempty"`
}

// L7Rule allows requests by method and path.
type L7Rule struct {
	// Method is an HTTP method in upper case, or "*" for any.
	Method string `json:"method"`
	// Path is a glob over the URL path: "*" matches one segment (no
	// '/'), "**" any rest including '/'; it starts with '/'.
	Path string `json:"path"`
}

// String gives the rule as "METHOD PATH".
func (r L7Rule) String() string { return r.Method + " " + r.Path }

// Match reports whether the rule allows a request.
func (r L7Rule) Match(method, path string) bool {
	if r.Method != "*" && !strings.EqualFold(r.Method, method) {
		return false
	}
	return matchPath(r.Path, path)
}

// matchPath matches a path glob segment by segment.
func matchPath(glob, path string) bool {
	return matchSegments(strings.Split(strings.TrimPrefix(glob, "/"), "/"), strings.Split(strings.TrimPrefix(path, "/"), "/"))
}

func matchSegments(g, p []string) bool {
	if len(g) == 0 {
		return len(p) == 0
	}
	if g[0] == "**" {
		for k := 0; k <= len(p); k++ {
			if matchSegments(g[1:], p[k:]) {
				return true
			}
		}
		return false
	}
	if len(p) == 0 || g[0] != "*" && g[0] != p[0] {
		return false
	}
	return matchSegments(g[1:], p[1:])
}

// SecretBinding binds a secret to the hosts it may be sent to. The value
// is not part of the policy: it lives host-side (see StateDir).
type SecretBinding struct {
	// Name is the environment variable in the sandbox that holds the
	// placeholder.
	Name string `json:"name"`
	// Hosts are host patterns (as in Rule.Host) the secret goes to.
	Hosts []string `json:"hosts"`
	// Prefix starts the placeholder (for SDKs that check key formats).
	Prefix string `json:"prefix,omitempty"`
}

// Policy is a sandbox's egress policy by address and name.
type Policy struct {
	// All allows every public destination (the entry "*"); deny entries
	// still apply.
	All bool `json:"all,omitempty"`
	// Allow and Deny are the entries; a deny entry wins over any allow.
	Allow []Rule `json:"allow,omitempty"`
	Deny  []Rule `json:"deny,omitempty"`
	// Hosts are the per-host L7 settings.
	Hosts []HostPolicy `json:"hosts,omitempty"`
	// Secrets are the secret bindings (names and hosts, no values).
	Secrets []SecretBinding `json:"secrets,omitempty"`
}

// HasNames reports whether enforcing p needs the proxy and the resolver:
// it has a name entry, an L7 setting or a secret.
func (p *Policy) HasNames() bool {
	if p == nil {
		return false
	}
	has := func(rs []Rule) bool { return slices.ContainsFunc(rs, Rule.IsName) }
	return has(p.Allow) || has(p.Deny) || len(p.Hosts) > 0 || len(p.Secrets) > 0
}

// AllowedCIDRs are the address allow entries; DeniedCIDRs the deny ones.
func (p *Policy) AllowedCIDRs() []netip.Prefix { return cidrs(p.Allow) }

// DeniedCIDRs are the address deny entries.
func (p *Policy) DeniedCIDRs() []netip.Prefix { return cidrs(p.Deny) }

func cidrs(rs []Rule) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range rs {
		if r.CIDR.IsValid() {
			out = append(out, r.CIDR)
		}
	}
	return out
}

// DecideName says whether a connection to name (normalised) on port is
// allowed, and by which entry ("*" for All).
func (p *Policy) DecideName(name string, port uint16) (rule string, ok bool) {
	for _, r := range p.Deny {
		if r.IsName() && MatchHost(r.Host, name) && (r.Port == 0 || r.Port == port) {
			return "!" + r.String(), false
		}
	}
	for _, r := range p.Allow {
		if r.MatchName(name, port) {
			return r.String(), true
		}
	}
	if p.All {
		return "*", true
	}
	return "", false
}

// ResolveName says whether the resolver answers queries for name: some
// entry allows it on some port and no port-less deny entry covers it.
func (p *Policy) ResolveName(name string) bool {
	for _, r := range p.Deny {
		if r.IsName() && r.Port == 0 && MatchHost(r.Host, name) {
			return false
		}
	}
	if p.All {
		return true
	}
	return slices.ContainsFunc(p.Allow, func(r Rule) bool { return r.IsName() && MatchHost(r.Host, name) })
}

// DecideAddr says whether a connection to address a (on any port) is
// allowed by an address entry, and by which.
func (p *Policy) DecideAddr(a netip.Addr) (rule string, ok bool) {
	a = a.Unmap()
	for _, r := range p.Deny {
		if r.CIDR.IsValid() && r.CIDR.Contains(a) {
			return "!" + r.String(), false
		}
	}
	for _, r := range p.Allow {
		if r.CIDR.IsValid() && r.CIDR.Contains(a) {
			return r.String(), true
		}
	}
	return "", false
}

// DeniedAddr reports whether a deny entry covers address a: the proxy
// never dials such an address, whatever a name resolves to.
func (p *Policy) DeniedAddr(a netip.Addr) bool {
	a = a.Unmap()
	return slices.ContainsFunc(p.Deny, func(r Rule) bool { return r.CIDR.IsValid() && r.CIDR.Contains(a) })
}

// Host returns the L7 settings of the most specific HostPolicy whose
// pattern covers name: an exact name first, then the wildcard with the
// longest base.
func (p *Policy) Host(name string) (HostPolicy, bool) {
	best, found := HostPolicy{}, false
	for _, h := range p.Hosts {
		if !MatchHost(h.Host, name) {
			continue
		}
		if h.Host == name {
			return h, true
		}
		if !found || len(strings.TrimLeft(h.Host, "*")) > len(strings.TrimLeft(best.Host, "*")) {
			best, found = h, true
		}
	}
	return best, found
}

// SecretsFor returns the secret bindings whose hosts cover name.
func (p *Policy) SecretsFor(name string) []SecretBinding {
	var out []SecretBinding
	for _, s := range p.Secrets {
		if slices.ContainsFunc(s.Hosts, func(h string) bool { return MatchHost(h, name) }) {
			out = append(out, s)
		}
	}
	return out
}

// Inspected reports whether connections to name are handed to the
// Inspector: its host has L7 rules or a secret is bound to it.
func (p *Policy) Inspected(name string) bool {
	h, ok := p.Host(name)
	return ok && len(h.Rules) > 0 || len(p.SecretsFor(name)) > 0
}

// NormalizeName lower-cases a host name and drops one trailing dot; it
// reports false for anything that is not an ASCII LDH name (IP literals,
// empty labels, other characters, over-long names or labels). Underscores
// are accepted (they occur in real names).
func NormalizeName(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" || len(s) > 253 {
		return "", false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "", false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	if !strings.Contains(s, ".") {
		return "", false
	}
	return s, true
}

// parseHostPattern checks a host pattern: a name, or "*." / "**." before a
// name that is not a public suffix (no "*.com", "**.co.uk").
func parseHostPattern(s string) (string, error) {
	wild := ""
	switch {
	case strings.HasPrefix(s, "**."):
		wild, s = "**.", s[3:]
	case strings.HasPrefix(s, "*."):
		wild, s = "*.", s[2:]
	}
	name, ok := NormalizeName(s)
	if !ok || strings.Contains(s, "*") {
		return "", fmt.Errorf("%q is not a host name; use a name like api.example.com, *.example.com (one label) or **.example.com (any depth)", wild+s)
	}
	if wild != "" {
		if suffix, _ := publicsuffix.PublicSuffix(name); suffix == name {
			return "", fmt.Errorf("%q covers a whole public suffix; name a domain below it, or write * to allow everything", wild+s)
		}
	}
	return wild + name, nil
}
