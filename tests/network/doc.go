// Package network holds the root-only tests of networking: bridged
// sandboxes, the network-namespace pool, published ports, two state roots
// side by side and dialing a sandbox port. Its TestMain is harness.Main
// (tests/internal/harness).
package network
