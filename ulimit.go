package sbx

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Ulimit is one resource limit of a sandbox's processes, docker's --ulimit
// NAME=SOFT[:HARD]: Name as setrlimit(2) names it without RLIMIT_
// ("nofile", "nproc", "core"...), Soft and Hard in its unit; -1 is
// unlimited.
type Ulimit struct {
	Name string `json:"name"`
	Soft int64  `json:"soft"`
	Hard int64  `json:"hard"`
}

// UlimitNames are the names Ulimit takes, as docker takes them.
var UlimitNames = []string{"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// ParseUlimit parses NAME=SOFT[:HARD] (HARD defaults to SOFT; -1 or
// "unlimited" is no limit).
func ParseUlimit(s string) (Ulimit, error) {
	name, vals, ok := strings.Cut(s, "=")
	if !ok {
		return Ulimit{}, fmt.Errorf("invalid ulimit %q: use NAME=SOFT[:HARD], e.g. nofile=1024:2048", s)
	}
	softS, hardS, hasHard := strings.Cut(vals, ":")
	if !hasHard {
		hardS = softS
	}
	num := func(v string) (int64, error) {
		if v == "unlimited" {
			return -1, nil
		}
		return strconv.ParseInt(v, 10, 64)
	}
	soft, err1 := num(softS)
	hard, err2 := num(hardS)
	if err1 != nil || err2 != nil {
		return Ulimit{}, fmt.Errorf("invalid ulimit %q: the limits must be numbers (or -1, unlimited)", s)
	}
	u := Ulimit{Name: name, Soft: soft, Hard: hard}
	return u, u.validate()
}

func (u Ulimit) validate() error {
	known := false
	for _, n := range UlimitNames {
		known = known || n == u.Name
	}
	switch {
	case !known:
		return fmt.Errorf("ulimit %q: unknown; use one of %s", u.Name, strings.Join(UlimitNames, ", "))
	case u.Soft < -1 || u.Hard < -1:
		return fmt.Errorf("ulimit %s: limits must be at least 0 (or -1: unlimited)", u.Name)
	case u.Hard != -1 && (u.Soft == -1 || u.Soft > u.Hard):
		return fmt.Errorf("ulimit %s: the soft limit %d is above the hard limit %d", u.Name, u.Soft, u.Hard)
	}
	return nil
}

// ParseExtraHost parses an /etc/hosts entry NAME:IP (or NAME=IP), as
// docker's --add-host takes it.
func ParseExtraHost(s string) (name string, ip netip.Addr, err error) {
	i := strings.IndexAny(s, ":=")
	if i <= 0 {
		return "", ip, fmt.Errorf("invalid extra host %q: use NAME:IP", s)
	}
	name = s[:i]
	ip, err = netip.ParseAddr(strings.Trim(s[i+1:], "[]"))
	if err != nil {
		if s[i+1:] == "host-gateway" {
			return "", ip, fmt.Errorf("invalid extra host %q: host-gateway is not supported; give the address", s)
		}
		return "", ip, fmt.Errorf("invalid extra host %q: %q is not an IP address", s, s[i+1:])
	}
	for _, c := range name {
		if !(c == '-' || c == '.' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "", ip, fmt.Errorf("invalid extra host %q: the name may hold letters, digits, '-', '_' and '.'", s)
		}
	}
	return name, ip, nil
}

// ExtraHostsLines are the /etc/hosts lines of extra (NAME:IP entries,
// valid as Validate checks them).
func ExtraHostsLines(extra []string) string {
	var b strings.Builder
	for _, e := range extra {
		if name, ip, err := ParseExtraHost(e); err == nil {
			fmt.Fprintf(&b, "%s\t%s\n", ip, name)
		}
	}
	return b.String()
}

// validateContainerExtras checks Ulimits, ExtraHosts, ShmSizeBytes and
// PublishAll.
func validateContainerExtras(o *Options) []error {
	var errs []error
	seen := map[string]bool{}
	for _, u := range o.Ulimits {
		if err := u.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[u.Name] {
			errs = append(errs, fmt.Errorf("ulimit %s is given twice", u.Name))
		}
		seen[u.Name] = true
	}
	for _, h := range o.ExtraHosts {
		if _, _, err := ParseExtraHost(h); err != nil {
			errs = append(errs, err)
		}
	}
	if o.ShmSizeBytes < 0 || (o.ShmSizeBytes > 0 && o.ShmSizeBytes < 4096) {
		errs = append(errs, fmt.Errorf("shm size %d: use at least 4k (or 0: the default, 64m)", o.ShmSizeBytes))
	}
	if o.PublishAll && o.Network != NetworkBridge {
		errs = append(errs, fmt.Errorf("publish_all (-P) needs bridge networking (--network bridge)"))
	}
	if o.PublishAll && o.IdleTimeout > 0 {
		errs = append(errs, fmt.Errorf("idle_timeout does not go with publish_all: traffic to a published port is not watched"))
	}
	return errs
}
