package egress

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"time"
)

// SandboxRef identifies the sandbox a connection came from, by its source
// address (which the bridge's anti-spoofing rules make trustworthy).
type SandboxRef struct {
	// ID is the sandbox's id.
	ID string
	// IP is its address on the bridge.
	IP netip.Addr
	// StateDir is the sandbox's host-side egress state (StateDir): CA,
	// secret values. Never mounted into the sandbox.
	StateDir string
}

// StateDir is where the host-side egress state of a sandbox lives:
// netStateDir is the network state directory of its sbx root (the
// netns Config.StateDir, recorded in each lease). The directory is 0700
// and its files 0600; the code that terminates TLS creates and removes it.
func StateDir(netStateDir, sandboxID string) string {
	return filepath.Join(netStateDir, "egress", sandboxID)
}

// DialFunc dials the policy-matched name (never the address the sandbox
// chose) on port, through the egress resolver; no resolved address that
// is private, link-local, metadata or denied is ever connected to.
// network is "tcp".
type DialFunc func(ctx context.Context, network string, port uint16) (net.Conn, error)

// AuditEvent is one egress decision: a connection (the proxy) or a request
// (an Inspector). It never holds a secret's value.
type AuditEvent struct {
	Time time.Time `json:"time"`
	// Sandbox is the sandbox's id.
	Sandbox string `json:"sandbox"`
	// Name is the host name (SNI, Host or DNS query); empty for an
	// address entry.
	Name string `json:"name,omitempty"`
	// Addr is the destination the sandbox chose (ip:port), for
	// connections.
	Addr string `json:"addr,omitempty"`
	// Kind is "dns", "connection" or "request".
	Kind string `json:"kind"`
	// Rule is the policy entry that decided, as written.
	Rule string `json:"rule,omitempty"`
	// Decision is "allow", "deny" or "audit" (an unmatched request let
	// through in audit mode).
	Decision string `json:"decision"`
	// Reason says why, for a deny.
	Reason string `json:"reason,omitempty"`
	// Method and Path are set for requests.
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// BytesUp and BytesDown count what went each way.
	BytesUp   int64 `json:"bytes_up,omitempty"`
	BytesDown int64 `json:"bytes_down,omitempty"`
}

// Conn is what an Inspector gets with an accepted connection.
type Conn struct {
	// Sandbox is where the connection came from.
	Sandbox SandboxRef
	// SNI is the checked server name (normalised; see NormalizeName):
	// the TLS server name, or the HTTP Host on a plain connection.
	SNI string
	// Port is the destination port the sandbox chose.
	Port uint16
	// TLS says whether the sandbox speaks TLS on the connection.
	TLS bool
	// Host is the matching L7 policy (zero when only secrets make the
	// host inspected).
	Host HostPolicy
	// Secrets are the bindings whose hosts cover SNI.
	Secrets []SecretBinding
	// Dial reaches the real upstream for SNI.
	Dial DialFunc
	// Audit records one event (per request).
	Audit func(AuditEvent)
}

// Inspector takes over connections to inspected hosts (Policy.Inspected):
// it terminates TLS, enforces L7 rules and swaps secrets.
type Inspector interface {
	// Serve owns conn until it returns, and closes it. The bytes the
	// proxy read to decide (the ClientHello, or the HTTP request head)
	// are replayed first, so conn can be handed to tls.Server or an
	// http.Server as it is.
	Serve(ctx context.Context, conn net.Conn, c Conn) error
}

// The ports of a bridge's egress daemon, on the bridge's address: nftables
// redirects sandboxes' TCP to ProxyPort and their DNS to DNSPort.
const (
	ProxyPort uint16 = 15001
	DNSPort   uint16 = 15053
)
