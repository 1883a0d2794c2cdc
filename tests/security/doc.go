// Package security holds the root-only adversarial tests: a hostile program
// inside the sandbox (tests/adversary), hostile executors and images, killed
// creates, and private user namespaces. Its TestMain is harness.Main
// (tests/internal/harness).
package security
