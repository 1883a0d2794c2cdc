// Package server holds the root-only tests of the REST server (sbx serve)
// and the remote CLI: routes, limits, events, the main command, restarts,
// TLS and tunnels. Its TestMain is harness.Main (tests/internal/harness).
package server
