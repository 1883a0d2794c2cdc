// Package cli holds the root-only tests of the sbx command line as a docker
// user meets it: run/exec/ps habits, messages, image and diff commands, and
// sbx bench. Its TestMain is harness.Main (tests/internal/harness).
package cli
