package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/imagecache/pack"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/userns"
)

// usernsHandle is a sandbox's user namespace: its leased id range and the
// namespace mapping onto it, held open until the sandbox has joined it.
type usernsHandle struct {
	rng userns.Range
	ns  *os.File
}

// newUserNS leases a range to owner (the one it holds already, for a
// sandbox started again) and makes its namespace.
func newUserNS(dir, owner string) (*usernsHandle, error) {
	a, err := userns.Open(dir)
	if err != nil {
		return nil, err
	}
	rng, err := a.Acquire(owner)
	if err != nil {
		return nil, err
	}
	ns, err := userns.New(rng)
	if err != nil {
		return nil, err
	}
	return &usernsHandle{rng: rng, ns: ns}, nil
}

// spec is the namespace for isolate.Spec; nil for none.
func (h *usernsHandle) spec() *isolate.UserNS {
	if h == nil {
		return nil
	}
	return &isolate.UserNS{Path: userns.Path(h.ns), HostID: h.rng.HostID, Size: h.rng.Size}
}

// releaseUserNS gives back owner's range, if it has one.
func releaseUserNS(dir, owner string) error {
	a, err := userns.Open(dir)
	if err != nil {
		return err
	}
	if err := a.Release(owner); err != nil {
		return fmt.Errorf("release the user namespace range of %s: %w", owner, err)
	}
	return nil
}

// runOwner and sandboxOwner name the holders of user namespace leases,
// host-wide: a one-shot run under a run root, a sandbox of a root.
func runOwner(runRoot, id string) string { return "run:" + filepath.Join(runRoot, id) }

func sandboxOwner(root, id string) string { return "sandbox:" + filepath.Join(root, id) }

// leasedRange is the id range owner holds.
func leasedRange(dir, owner string) (userns.Range, error) {
	a, err := userns.Open(dir)
	if err != nil {
		return userns.Range{}, err
	}
	r, ok, err := a.Lookup(owner)
	if err == nil && !ok {
		err = fmt.Errorf("no user namespace range is leased to %s (was it released by hand?)", owner)
	}
	return r, err
}

// packer is how sb's files are written as a tar (sbx commit, sbx export):
// with the owners the sandbox sees. In a private user namespace its files
// belong to its host range on disk (and the image's show through
// id-mapped layers as that range too), so owners are shifted back.
func (h *Host) packer(sb *sbx.Sandbox) (func(w io.Writer, dir string, skip func(rel string) bool) error, error) {
	if sb.Options.UserNS != sbx.UserNSPrivate {
		return pack.Write, nil
	}
	rng, err := leasedRange(h.cfg.UserNSDir, sandboxOwner(h.store.Root(), sb.ID))
	if err != nil {
		return nil, err
	}
	return func(w io.Writer, dir string, skip func(rel string) bool) error {
		return pack.WriteShifted(w, dir, skip, rng.HostID, rng.Size)
	}, nil
}
