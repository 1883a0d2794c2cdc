package seccomp

import (
	"errors"
	"fmt"
	"os"

	mobyseccomp "github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runc/libcontainer/configs"
	lcseccomp "github.com/opencontainers/runc/libcontainer/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Profile names accepted by Resolve besides a file path.
const (
	Default    = "default"
	Unconfined = "unconfined"
)

// maxProfileBytes caps the size of a profile file.
const maxProfileBytes = 1 << 20

// Resolve returns the seccomp filter for a sandbox: Docker's default profile
// (matched to the capabilities and architecture in spec), none for
// "unconfined", or a Docker or OCI JSON profile read from a file. The result
// is nil when no filter applies.
func Resolve(profile string, spec *specs.Spec) (*specs.LinuxSeccomp, error) {
	switch profile {
	case "", Default:
		p, err := mobyseccomp.GetDefaultProfile(spec)
		if err != nil {
			return nil, fmt.Errorf("build default seccomp profile: %w", err)
		}
		return p, nil
	case Unconfined:
		return nil, nil
	}
	fi, err := os.Stat(profile)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %q: use default, unconfined or a JSON file: %w", profile, err)
	}
	if fi.Size() > maxProfileBytes {
		return nil, fmt.Errorf("seccomp profile %q is larger than %d bytes", profile, maxProfileBytes)
	}
	body, err := os.ReadFile(profile)
	if err != nil {
		return nil, fmt.Errorf("read seccomp profile: %w", err)
	}
	p, err := mobyseccomp.LoadProfile(string(body), spec)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile %q: %w", profile, err)
	}
	if p == nil {
		return nil, fmt.Errorf("seccomp profile %q has no defaultAction and no syscalls; use --seccomp unconfined to run without a filter", profile)
	}
	return p, nil
}

// Supported reports whether this binary was built with seccomp support and
// the libseccomp version it uses.
func Supported() (bool, string) {
	if !lcseccomp.Enabled {
		return false, ""
	}
	major, minor, micro := lcseccomp.Version()
	return true, fmt.Sprintf("%d.%d.%d", major, minor, micro)
}

// errNoSeccomp is what a binary built without seccomp support says when a
// filter is asked for, to a CLI user and to a program embedding sbx.
var errNoSeccomp = errors.New("this sbx binary was built without seccomp support; rebuild with -tags seccomp (go build -tags seccomp, for a program embedding sbx), or run without a filter: --seccomp unconfined, Options.Seccomp = \"unconfined\" for a library caller")

// Check fails when a filter is requested but this binary cannot apply it, so
// that a build without the seccomp tag fails at once with a clear message.
func Check(f *configs.Seccomp) error {
	if f != nil && !lcseccomp.Enabled {
		return errNoSeccomp
	}
	return nil
}
