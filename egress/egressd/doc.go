// Package egressd is the egress daemon of a bridge: a DNS resolver that
// answers only the names a sandbox's policy allows, and a transparent
// proxy that takes the sandbox's redirected TCP connections (nftables,
// package netns), reads the TLS server name or the HTTP Host, checks it
// against the policy, and dials the name itself (never the address the
// sandbox chose) through the same resolver, refusing private, metadata
// and denied addresses before connecting. Allowed connections are spliced
// without decrypting; connections to inspected hosts (L7 rules, secrets)
// are handed to an egress.Inspector.
//
// Sandboxes are told apart by source address (Config.Lookup); the policy
// is read at each connection and query, so a changed policy applies to
// the next one. One daemon serves a bridge: the sandbox package starts it
// on demand (a background `sbx egressd`, guarded by a lock) and `sbx serve`
// runs it in-process. When it is down, nftables still redirects, so
// connections are reset and queries fail: fail closed.
package egressd
