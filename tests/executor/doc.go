// Package executor holds the root-only tests of the in-sandbox executor:
// exec, sessions, files and archives, the main command, attach, limits, and
// exec cancel and OOM through the server. Its TestMain is harness.Main
// (tests/internal/harness).
package executor
