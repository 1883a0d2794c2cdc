// Package version holds the build's version, set with -ldflags -X.
package version

// Version and Commit are set at build time by the Makefile.
var (
	Version = "0.1.0-dev"
	Commit  = "unknown"
)
