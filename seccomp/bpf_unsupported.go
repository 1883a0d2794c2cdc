//go:build !(cgo && seccomp)

package seccomp

import (
	"errors"

	"github.com/opencontainers/runc/libcontainer/configs"
)

var errNoSeccomp = errors.New("this sbx binary was built without seccomp support; rebuild with -tags seccomp")

// Compile is unavailable without the seccomp build tag.
func Compile(*configs.Seccomp) ([]byte, error) { return nil, errNoSeccomp }

// CompileCached is unavailable without the seccomp build tag.
func CompileCached(*configs.Seccomp, string) ([]byte, error) { return nil, errNoSeccomp }
