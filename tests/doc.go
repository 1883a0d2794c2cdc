// Package tests is the root of the integration and end-to-end tests: they
// need root and a real kernel, and run the sbx binary and the library
// across packages. Each area is a package of its own, whose TestMain is
// harness.Main:
//
//	cli        the command line as a docker user meets it, sbx bench
//	executor   the in-sandbox executor: exec, sessions, files, main command
//	images     pulls, the image store and its gc, import, save, commit, builds
//	lifecycle  long-lived sandboxes through the CLI, state faults, leases
//	network    bridged sandboxes, the namespace pool, ports, dialing
//	pools      warm pools: fill, claim, claims killed part way
//	run        one-shot runs (sbx run)
//	security   the adversarial suite (tests/adversary), user namespaces
//	server     the REST server and the remote CLI
//	snapshots  checkpoints, restores, forks, idle checkpointing
//
// Beside them: tests/internal/harness (what the areas share), tests/fixture
// (busybox and Debian roots, a registry on 127.0.0.1), tests/openhands and
// tests/kubernetes (end-to-end suites with their own set-up).
package tests
