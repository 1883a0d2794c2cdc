// Package seccomp provides the default seccomp profile and loads OCI and Docker JSON profiles.
package seccomp
