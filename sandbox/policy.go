package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/errkind"
	"github.com/sbxrun/sbx/netns"
)

// applyPolicy checks o against p (nil allows everything):
// host paths only under allowed directories (rewritten to their resolved
// form, so a symlink swapped later cannot redirect them), host networking
// and privileges only when allowed. Errors wrap sbx.ErrForbidden, or
// sbx.ErrInvalid for a path that does not exist.
func applyPolicy(p *sbx.Policy, o *sbx.Options) error {
	if p == nil {
		return nil
	}
	if o.Rootfs != "" {
		real, err := allowedHostPath(p, o.Rootfs, "rootfs")
		if err != nil {
			return err
		}
		o.Rootfs = real
	}
	vols := make([]sbx.Volume, len(o.Volumes))
	for i, v := range o.Volumes {
		if v.Name != "" {
			vols[i] = v // a named volume: the host says where (resolveVolumes)
			continue
		}
		real, err := allowedHostPath(p, v.HostPath, "volume host path")
		if err != nil {
			return err
		}
		vols[i] = v
		vols[i].HostPath = real
	}
	o.Volumes = vols
	if !p.AllowHostNetwork {
		if o.Network == sbx.NetworkHost {
			return forbidden("network \"host\" is not allowed by this server (sbx serve --allow-host-network)")
		}
		if len(o.AllowHostPorts) > 0 {
			return forbidden("allow_host_ports is not allowed by this server (sbx serve --allow-host-network)")
		}
		for _, d := range o.DNS {
			if a, err := netip.ParseAddr(d); err == nil && (netns.PrivateAddr(a) || hostAddr(a)) {
				return forbidden("dns %s: a private, loopback, link-local or host address opens port 53 to it; not allowed by this server (sbx serve --allow-host-network)", d)
			}
		}
	}
	if !p.AllowPrivileged {
		if len(o.CapAdd) > 0 {
			return forbidden("cap_add is not allowed by this server (sbx serve --allow-privileged)")
		}
		if o.Seccomp != "" && o.Seccomp != "default" {
			return forbidden("seccomp %q is not allowed by this server: only the default profile (sbx serve --allow-privileged)", o.Seccomp)
		}
	}
	return nil
}

// normalizePolicy copies p with its directories cleaned, refusing relative
// ones; nil stays nil.
func normalizePolicy(p *sbx.Policy) (*sbx.Policy, error) {
	if p == nil {
		return nil, nil
	}
	n := *p
	n.AllowedHostDirs = make([]string, len(p.AllowedHostDirs))
	for i, d := range p.AllowedHostDirs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("%w: allowed host directory %q must be absolute", sbx.ErrInvalid, d)
		}
		n.AllowedHostDirs[i] = filepath.Clean(d)
	}
	return &n, nil
}

// PolicyView is a Host whose creates, runs, preparations and imports are
// held to a policy of their own instead of HostConfig.Policy: a front-end
// that trusts some paths per request (a Nomad task's own directories)
// makes one per request. It forwards each method of the contract
// explicitly, saying for each whether the policy applies, so that a new
// method of sbx.Sandboxes or sbx.Images fails the build here until that is
// decided; besides, it has the warm pools (policyview.go) and Claim, and
// nothing of the Host's background work.
type PolicyView struct {
	h      *Host
	policy *sbx.Policy
}

var (
	_ sbx.Sandboxes = (*PolicyView)(nil)
	_ sbx.Images    = (*PolicyView)(nil)
)

// WithPolicy returns a view of h held to p (nil allows everything). It is
// cheap. A relative allowed directory is an error.
func (h *Host) WithPolicy(p *sbx.Policy) (*PolicyView, error) {
	n, err := normalizePolicy(p)
	if err != nil {
		return nil, err
	}
	return &PolicyView{h: h, policy: n}, nil
}

// hostAddr reports whether a is assigned to one of the host's interfaces
// (a name server there would be the host itself).
func hostAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: refuse
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if h, ok := netip.AddrFromSlice(n.IP); ok && h.Unmap() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// allowedHostPath resolves path (symlinks included) and checks that it
// lies under one of the policy's allowed directories.
func allowedHostPath(p *sbx.Policy, path, what string) (string, error) {
	if len(p.AllowedHostDirs) == 0 {
		return "", forbidden("%s %q: this server allows no host paths (sbx serve --allow-host-dir DIR)", what, path)
	}
	if !filepath.IsAbs(path) {
		return "", invalid("%s %q must be an absolute path", what, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", invalid("%s %q does not exist on the server", what, path)
		}
		return "", invalid("%s %q: %v", what, path, err)
	}
	for _, d := range p.AllowedHostDirs {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			d = rd
		}
		if real == d || strings.HasPrefix(real, d+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", forbidden("%s %q is not under a directory this server allows", what, path)
}

// forbidden is an error that errors.Is reports as sbx.ErrForbidden, with
// only its own message.
func forbidden(format string, args ...any) error {
	return errkind.New(fmt.Sprintf(format, args...), sbx.ErrForbidden)
}

// invalid is an error that errors.Is reports as sbx.ErrInvalid, with only
// its own message.
func invalid(format string, args ...any) error {
	return errkind.New(fmt.Sprintf(format, args...), sbx.ErrInvalid)
}
