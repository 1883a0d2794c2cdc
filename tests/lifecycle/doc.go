// Package lifecycle holds the root-only tests of long-lived sandboxes
// through the CLI: create, start, stop, pause, copy, commit, leases, damaged
// state, full disks, gc of debris, and the embedding guide. Its TestMain is
// harness.Main (tests/internal/harness).
package lifecycle
