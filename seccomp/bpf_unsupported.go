//go:build !(cgo && seccomp)

package seccomp

import "github.com/opencontainers/runc/libcontainer/configs"

// Compile is unavailable without the seccomp build tag.
func Compile(*configs.Seccomp) ([]byte, error) { return nil, errNoSeccomp }

// CompileCached is unavailable without the seccomp build tag.
func CompileCached(*configs.Seccomp, string) ([]byte, error) { return nil, errNoSeccomp }
