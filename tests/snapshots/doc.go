// Package snapshots holds the root-only tests of checkpoints, restores,
// forks, exported snapshots and idle checkpointing. Its TestMain is
// harness.Main (tests/internal/harness).
package snapshots
