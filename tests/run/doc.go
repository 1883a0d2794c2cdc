// Package run holds the root-only tests of one-shot runs (sbx run):
// isolation, limits, signals, exit codes, images and gc of runs. Its
// TestMain is harness.Main (tests/internal/harness).
package run
