// Package pools holds the root-only tests of warm pools: fills and claims
// over the server, claims killed part way and claims whose port is taken.
// Its TestMain is harness.Main (tests/internal/harness).
package pools
