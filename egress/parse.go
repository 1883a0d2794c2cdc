package egress

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Parse parses the entries of --egress (after "default" and "none", which
// the caller handles): comma-separated CIDRs, addresses, host patterns
// with an optional :port, "*" for every public destination, and any of
// them but "*" prefixed with "!" to deny.
func Parse(s string) (Policy, error) {
	var p Policy
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if err := p.add(part); err != nil {
			return Policy{}, fmt.Errorf("--egress %q: %w", s, err)
		}
	}
	if !p.All && len(p.Allow) == 0 {
		return Policy{}, fmt.Errorf("--egress %q: nothing is allowed; use none to block all egress, or name hosts or CIDRs", s)
	}
	return p, nil
}

// add parses one entry into p.
func (p *Policy) add(entry string) error {
	deny := strings.HasPrefix(entry, "!")
	body := strings.TrimPrefix(entry, "!")
	if body == "*" || body == "**" {
		if deny || body == "**" {
			return fmt.Errorf("%q: only a plain * means every destination; use none to block all egress", entry)
		}
		p.All = true
		return nil
	}
	r, err := ParseRule(body)
	if err != nil {
		return err
	}
	list := &p.Allow
	if deny {
		list = &p.Deny
	}
	if !slices.Contains(*list, r) {
		*list = append(*list, r)
	}
	return nil
}

// ParseRule parses one entry without "!": an IPv4 CIDR or address, or
// HOST[:PORT].
func ParseRule(s string) (Rule, error) {
	if strings.ContainsAny(s, "/") || isAddr(s) {
		var pfx netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			pfx, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil || !pfx.Addr().Is4() {
			return Rule{}, fmt.Errorf("%q is not an IPv4 CIDR", s)
		}
		return Rule{CIDR: pfx.Masked()}, nil
	}
	host, portStr, hasPort := strings.Cut(s, ":")
	var port uint16
	if hasPort {
		n, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || n == 0 {
			return Rule{}, fmt.Errorf("%q: port must be a number 1-65535", s)
		}
		port = uint16(n)
	}
	h, err := parseHostPattern(host)
	if err != nil {
		return Rule{}, err
	}
	return Rule{Host: h, Port: port}, nil
}

func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// fileHost is the per-host part of a policy file.
type fileHost struct {
	Rules []string `yaml:"rules" json:"rules"`
	Mode  string   `yaml:"mode" json:"mode"`
}

// fileSecret is a secret binding in a policy file.
type fileSecret struct {
	Name   string   `yaml:"name" json:"name"`
	Hosts  []string `yaml:"hosts" json:"hosts"`
	Prefix string   `yaml:"prefix" json:"prefix"`
}

// policyFile is the format ParseFile reads.
type policyFile struct {
	Allow   []string            `yaml:"allow"`
	Deny    []string            `yaml:"deny"`
	Hosts   map[string]fileHost `yaml:"hosts"`
	Secrets []fileSecret        `yaml:"secrets"`
}

// ParseFile parses a policy file (YAML, or JSON which is YAML too):
//
//	allow: [api.openai.com, "*.githubusercontent.com", github.com, 10.1.0.0/16]
//	deny: [gist.github.com]
//	hosts:
//	  api.github.com:
//	    rules: ["GET /repos/**", "POST /repos/*/*/issues"]
//	    mode: enforce            # or audit
//	secrets:
//	  - {name: GITHUB_TOKEN, hosts: [api.github.com], prefix: ghp_}
//
// Unknown keys are errors. A host under hosts and every secret's hosts
// must be allowed by an allow entry.
func ParseFile(data []byte) (Policy, error) {
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Policy{}, fmt.Errorf("egress policy file: %w", err)
	}
	var p Policy
	for _, e := range f.Allow {
		if strings.HasPrefix(e, "!") {
			return Policy{}, fmt.Errorf("egress policy file: allow entry %q: put deny entries under deny", e)
		}
		if err := p.add(e); err != nil {
			return Policy{}, fmt.Errorf("egress policy file: allow: %w", err)
		}
	}
	for _, e := range f.Deny {
		if err := p.add("!" + strings.TrimPrefix(e, "!")); err != nil {
			return Policy{}, fmt.Errorf("egress policy file: deny: %w", err)
		}
	}
	hosts := make([]string, 0, len(f.Hosts))
	for h := range f.Hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		hp, err := parseHostPolicy(h, f.Hosts[h])
		if err != nil {
			return Policy{}, fmt.Errorf("egress policy file: hosts: %w", err)
		}
		p.Hosts = append(p.Hosts, hp)
	}
	for _, s := range f.Secrets {
		b, err := parseSecret(s)
		if err != nil {
			return Policy{}, fmt.Errorf("egress policy file: secrets: %w", err)
		}
		p.Secrets = append(p.Secrets, b)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("egress policy file: %w", err)
	}
	return p, nil
}

var methodRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\*|[A-Z]+)$`) })

func parseHostPolicy(host string, f fileHost) (HostPolicy, error) {
	h, err := parseHostPattern(host)
	if err != nil {
		return HostPolicy{}, err
	}
	hp := HostPolicy{Host: h}
	switch f.Mode {
	case "", "enforce":
	case "audit":
		hp.Audit = true
	default:
		return HostPolicy{}, fmt.Errorf("%s: mode %q is not known; use enforce or audit", host, f.Mode)
	}
	for _, r := range f.Rules {
		rule, err := ParseL7Rule(r)
		if err != nil {
			return HostPolicy{}, fmt.Errorf("%s: %w", host, err)
		}
		hp.Rules = append(hp.Rules, rule)
	}
	if len(hp.Rules) == 0 {
		return HostPolicy{}, fmt.Errorf("%s: no rules; list requests as \"METHOD /path/glob\"", host)
	}
	return hp, nil
}

// ParseL7Rule parses "METHOD /path/glob" ("*" for any method).
func ParseL7Rule(s string) (L7Rule, error) {
	method, path, ok := strings.Cut(strings.TrimSpace(s), " ")
	path = strings.TrimSpace(path)
	if !ok || !methodRE().MatchString(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#") {
		return L7Rule{}, fmt.Errorf("rule %q: write \"METHOD /path/glob\" (method in upper case or *, path from /, * one segment, ** any depth)", s)
	}
	return L7Rule{Method: method, Path: path}, nil
}

var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func parseSecret(s fileSecret) (SecretBinding, error) {
	if !envNameRE().MatchString(s.Name) {
		return SecretBinding{}, fmt.Errorf("name %q is not an environment variable name", s.Name)
	}
	if len(s.Hosts) == 0 {
		return SecretBinding{}, fmt.Errorf("%s: no hosts; a secret is bound to the hosts it may be sent to", s.Name)
	}
	b := SecretBinding{Name: s.Name, Prefix: s.Prefix}
	for _, h := range s.Hosts {
		p, err := parseHostPattern(h)
		if err != nil {
			return SecretBinding{}, fmt.Errorf("%s: %w", s.Name, err)
		}
		b.Hosts = append(b.Hosts, p)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{0,32}$`).MatchString(s.Prefix) {
		return SecretBinding{}, fmt.Errorf("%s: prefix %q: use at most 32 letters, digits, '-' or '_'", s.Name, s.Prefix)
	}
	return b, nil
}

// Validate checks what Parse and ParseFile guarantee, for policies that
// arrive as values (the API): entries well-formed, L7 hosts and secret
// hosts allowed, no duplicate secret names.
func (p *Policy) Validate() error {
	for _, list := range [][]Rule{p.Allow, p.Deny} {
		for _, r := range list {
			if err := r.validate(); err != nil {
				return err
			}
		}
	}
	if !p.All && len(p.Allow) == 0 {
		return fmt.Errorf("nothing is allowed; use none to block all egress")
	}
	for _, h := range p.Hosts {
		if _, err := parseHostPattern(h.Host); err != nil {
			return fmt.Errorf("hosts: %w", err)
		}
		if len(h.Rules) == 0 {
			return fmt.Errorf("hosts: %s has no rules", h.Host)
		}
		for _, r := range h.Rules {
			if _, err := ParseL7Rule(r.String()); err != nil {
				return fmt.Errorf("hosts: %s: %w", h.Host, err)
			}
		}
		if !p.coversPattern(h.Host) {
			return fmt.Errorf("hosts: %s is not allowed by any allow entry; add it to allow", h.Host)
		}
	}
	seen := map[string]bool{}
	for _, s := range p.Secrets {
		if _, err := parseSecret(fileSecret(s)); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		if seen[s.Name] {
			return fmt.Errorf("secrets: %s is bound twice; list all its hosts in one binding", s.Name)
		}
		seen[s.Name] = true
		for _, h := range s.Hosts {
			if !p.coversPattern(h) {
				return fmt.Errorf("secrets: %s: host %s is not allowed by any allow entry; add it to allow", s.Name, h)
			}
		}
	}
	return nil
}

func (r Rule) validate() error {
	if r.CIDR.IsValid() == (r.Host != "") {
		return fmt.Errorf("egress entry %+v: give exactly one of a CIDR and a host", r)
	}
	if r.CIDR.IsValid() {
		if !r.CIDR.Addr().Is4() || r.CIDR.Masked() != r.CIDR {
			return fmt.Errorf("egress entry %s: not a masked IPv4 CIDR", r.CIDR)
		}
		if r.Port != 0 {
			return fmt.Errorf("egress entry %s: a CIDR entry covers every port", r.CIDR)
		}
		return nil
	}
	h, err := parseHostPattern(r.Host)
	if err != nil {
		return err
	}
	if h != r.Host {
		return fmt.Errorf("egress entry %q: write host names in lower case without a trailing dot", r.Host)
	}
	return nil
}

// coversPattern reports whether an allow entry (or All) covers every name
// the pattern h covers, on some port.
func (p *Policy) coversPattern(h string) bool {
	if p.All {
		return true
	}
	for _, r := range p.Allow {
		if !r.IsName() {
			continue
		}
		if r.Host == h {
			return true
		}
		if strings.HasPrefix(h, "*") {
			// A wildcard is covered by a ** entry above its base.
			_, base, _ := strings.Cut(h, ".")
			if strings.HasPrefix(r.Host, "**.") && MatchHost(r.Host, "x."+base) {
				return true
			}
			continue
		}
		if MatchHost(r.Host, h) {
			return true
		}
	}
	return false
}
