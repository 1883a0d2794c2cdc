// Package egress is the egress policy language of bridged sandboxes and the
// hook between the egress proxy and the code that inspects TLS.
//
// A Policy allows and denies destinations by IPv4 CIDR and by host name
// ("api.example.com", "*.example.com" for exactly one more label,
// "**.example.com" for any depth, each with an optional :port; names
// default to ports 443 and 80). Deny entries win. "*" (every public
// destination) is only taken when written explicitly. Per host, a policy can
// carry L7 rules (method and path) and secret bindings; such hosts are
// inspected: the proxy hands their connections to an Inspector.
//
// Parse reads the --egress syntax, ParseFile a policy file (YAML or JSON).
// The daemon that enforces policies is package egress/egressd; see
// docs/network.md.
package egress
